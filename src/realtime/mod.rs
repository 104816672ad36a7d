//! Supabase Realtime's API at `/realtime/v1` (`realtime-enabled`): WebSockets speaking Phoenix's
//! channel protocol as supabase-js's realtime client does (`frame`), with database changes
//! (`postgres_changes`) from the backend's change feed, broadcast between clients, and
//! presence; and the REST broadcast endpoint.
//!
//! Layout: `change` is the seam with the backends (the [`Feed`] they hand commits to, the
//! [`RowAccess`] realtime asks about rights); `socket` one connection; `join` a join's
//! payload; `filter` a binding's filter; `hub` who is subscribed to what; `dispatch` the
//! delivery of changes; `presence` the presence state; `rest` the HTTP endpoints; `door` what
//! another door's subscribers (PocketBase's server-sent events) ask of it.
//!
//! What a subscriber receives is decided as a read by it would be: the backend answers which
//! rows its role and claims may read (row-level security, or SQLite's access rules), checked
//! once per distinct role and claims for a batch of changes, never once per subscriber.

mod change;
mod dispatch;
mod door;
mod filter;
mod frame;
mod hub;
mod join;
mod presence;
mod rest;
mod socket;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio_tungstenite::tungstenite::Message;

pub use change::{Change, Commit, Feed, FeedEvent, Kind, Relation, Row, RowAccess, TableAccess, Wanted};
pub use door::{ChangeWriter, DoorConnection, DoorSubscription};
pub use filter::compare as compare_value;
pub use hub::Outbox;
pub use rest::{broadcast_api, query_value, upgrade};

use crate::auth::{Authenticator, Principal};
use crate::config::RealtimeSettings;
use crate::schema::{QualifiedName, SchemaCache, SharedSchema};
use hub::{Binding, Hub, PgChannel, Who};

/// Commits waiting for the dispatcher at most; past it the feed drops them and subscribers
/// are told changes were missed.
const FEED_QUEUE: usize = 4096;

/// How long what a role may read of a table is trusted without asking again: grants changed
/// without a schema reload are seen within it.
const ACCESS_TTL: Duration = Duration::from_secs(10);

/// What each role may read of each table.
type AccessCache = HashMap<(Arc<str>, QualifiedName), TableAccess>;

/// The tables whose changes may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// These tables (PostgreSQL's publication `supabase_realtime`, SQLite's `realtime-tables`).
    Tables(HashSet<QualifiedName>),
    /// Every table (a publication `FOR ALL TABLES`).
    All,
}

impl Published {
    /// Whether changes of `name` are published.
    pub fn contains(&self, name: &QualifiedName) -> bool {
        match self {
            Published::All => true,
            Published::Tables(t) => t.contains(name),
        }
    }

    /// Whether a table of `schema` that the schema cache knows is published.
    pub fn any_in(&self, schema: &str, cache: &SchemaCache) -> bool {
        cache.relations.keys().any(|n| n.schema == schema && self.contains(n))
    }
}

/// Counters for `/rowgate/metrics`.
#[derive(Default)]
pub struct Metrics {
    /// Open connections.
    pub connections: AtomicI64,
    /// `postgres_changes` messages queued for clients.
    pub delivered: AtomicU64,
    /// Connections closed for falling behind.
    pub overflowed: AtomicU64,
}

/// The realtime service of one server.
pub struct Realtime {
    settings: RealtimeSettings,
    max_connections: usize,
    auth: Arc<Authenticator>,
    schema: Arc<SharedSchema>,
    hub: Hub,
    access: OnceLock<Arc<dyn RowAccess>>,
    published: ArcSwap<Published>,
    feed: Feed,
    next: AtomicU64,
    /// What each role may read of each table, for the schema cache snapshot it was asked
    /// under (a reload starts afresh), for at most `ACCESS_TTL`.
    access_cache: Mutex<(Weak<SchemaCache>, Instant, AccessCache)>,
    /// Counters.
    pub metrics: Metrics,
}

impl Realtime {
    /// The service, with its dispatcher running; the backend is given [`Realtime::feed`]
    /// and answers for rights once [`Realtime::set_access`] is called.
    pub fn start(
        settings: RealtimeSettings,
        max_connections: usize,
        auth: Arc<Authenticator>,
        schema: Arc<SharedSchema>,
    ) -> Arc<Realtime> {
        let (tx, rx) = tokio::sync::mpsc::channel(FEED_QUEUE);
        let hub = Hub::default();
        let feed = Feed {
            tx,
            wanted: hub.wanted.clone(),
            live: Arc::new(AtomicBool::new(false)),
            news: Arc::new(change::News::default()),
            only_published: Arc::new(AtomicBool::new(false)),
        };
        let rt = Arc::new(Realtime {
            settings,
            max_connections,
            auth,
            schema,
            hub,
            access: OnceLock::new(),
            published: ArcSwap::from_pointee(Published::Tables(HashSet::new())),
            feed,
            next: AtomicU64::new(1),
            access_cache: Mutex::new((Weak::new(), Instant::now(), HashMap::new())),
            metrics: Metrics::default(),
        });
        tokio::spawn(dispatch::run(rt.clone(), rx));
        rt
    }

    /// Where the backend's change feed hands over commits.
    pub fn feed(&self) -> Feed {
        self.feed.clone()
    }

    /// The backend that answers for subscribers' rights.
    pub fn set_access(&self, access: Arc<dyn RowAccess>) {
        let _ = self.access.set(access);
    }

    /// What roles may read changed (the SQLite access rules were reloaded): asked again from the
    /// next change on, not after [`ACCESS_TTL`].
    pub fn rights_changed(&self) {
        let mut cache = self.access_cache.lock().unwrap_or_else(|e| e.into_inner());
        *cache = (Weak::new(), Instant::now(), HashMap::new());
    }

    /// Every channel with its members, presences and change bindings (the dashboard's view).
    pub fn channels(&self) -> serde_json::Value {
        self.hub.channels()
    }

    /// The tables whose changes may be sent (the backend keeps this current).
    pub fn set_published(&self, published: Published) {
        self.published.store(Arc::new(published));
    }

    fn next_connection(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The caller a token makes (`Err`: Supabase's join `reason`).
    fn verify(&self, token: &str) -> Result<Who, String> {
        // An empty access token is none (realtime-js sends one when signed out).
        let authorization = (!token.is_empty()).then(|| format!("Bearer {token}"));
        match self.auth.authenticate(authorization.as_deref()) {
            Ok(principal) => Ok(who(principal)),
            Err(crate::error::Error::JwtExpired) => {
                let ago = unverified_exp(token).map_or(0, |exp| now().saturating_sub(exp));
                Err(format!("InvalidJWTToken: Token has expired {ago} seconds ago"))
            }
            Err(crate::error::Error::JwtSignature) => {
                Err("JwtSignatureError: Failed to validate JWT signature".into())
            }
            Err(crate::error::Error::Jwt(m) | crate::error::Error::JwtClaims(m)) => {
                Err(format!("InvalidJWTToken: {m}"))
            }
            Err(_) => Err("MalformedJWT: The token provided is not a valid JWT".into()),
        }
    }

    /// What `who`'s role may read of `table`, asked once per role and schema cache snapshot.
    async fn table_access(
        &self,
        access: &dyn RowAccess,
        who: &Principal,
        table: &QualifiedName,
    ) -> TableAccess {
        let role = &who.role;
        // Held weakly, a snapshot's allocation outlives it: no later snapshot can take its address.
        let snapshot = self.schema.load().map(|s| Arc::downgrade(&s)).unwrap_or_default();
        {
            let mut cache = self.access_cache.lock().unwrap_or_else(|e| e.into_inner());
            if !cache.0.ptr_eq(&snapshot) || cache.1.elapsed() > ACCESS_TTL {
                *cache = (snapshot.clone(), Instant::now(), HashMap::new());
            }
            if let Some(a) = cache.2.get(&(role.clone(), table.clone())) {
                return a.clone();
            }
        }
        let a = match access.table_access(who, table).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, role = %role, table = %table.name, "realtime: the role's rights could not be read");
                return TableAccess { columns: Vec::new(), by_claims: true, by_row: true };
            }
        };
        let mut cache = self.access_cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.0.ptr_eq(&snapshot) {
            cache.2.insert((role.clone(), table.clone()), a.clone());
        }
        a
    }

    /// Checks that `principal` may read each named table of `bindings` and the columns their
    /// filters and selections name (the message is the subscriber's).
    async fn check_columns(&self, principal: &Principal, bindings: &[Binding]) -> Result<(), String> {
        let Some(access) = self.access.get() else {
            return Err("Realtime is starting: subscribe again in a moment".into());
        };
        for b in bindings {
            let (Some(schema), Some(table)) = (&b.schema, &b.table) else { continue };
            let name = QualifiedName { schema: schema.clone(), name: table.clone() };
            let a = self.table_access(access.as_ref(), principal, &name).await;
            if a.columns.is_empty() {
                return Err(format!("permission denied for table {table}"));
            }
            let readable = |c: &str| a.columns.iter().any(|x| x == c);
            if let Some(c) = b.filter.columns().find(|c| !readable(c)) {
                return Err(format!("invalid column for filter {c}"));
            }
            if let Some(c) = b.select.iter().flatten().find(|c| !readable(c)) {
                return Err(format!("invalid column for select {c}"));
            }
        }
        Ok(())
    }

    /// The `system` message a channel gets once its bindings are in place.
    fn subscribed_message(&self, ch: &PgChannel) -> Option<Message> {
        match self.feed.live.load(Ordering::SeqCst) {
            true => ch.system(true, "Subscribed to PostgreSQL"),
            false => {
                ch.system(false, "Waiting for the database's change feed: changes are sent once it runs")
            }
        }
    }

    /// The feed's news, told to every channel listening to changes.
    fn feed_event(&self, event: FeedEvent) {
        let (ok, message) = match event {
            FeedEvent::Ready => (true, "Subscribed to PostgreSQL".to_owned()),
            FeedEvent::Lost(why) => {
                tracing::warn!(error = %why, "realtime: the change feed stopped");
                (
                    false,
                    "The database's change feed stopped: changes made until it is back are not sent"
                        .to_owned(),
                )
            }
            FeedEvent::Overrun => {
                tracing::warn!("realtime fell behind the change feed: changes were dropped");
                (false, "Realtime fell behind the database: some changes were not sent".to_owned())
            }
        };
        for ch in self.hub.listening().all() {
            if let Some(m) = ch.system(ok, &message) {
                ch.outbox.push(m);
            }
        }
    }

    /// Counters in Prometheus's text format.
    pub fn render_metrics(&self, out: &mut String) {
        let m = &self.metrics;
        out.push_str("# HELP rowgate_realtime_connections Open realtime connections.\n# TYPE rowgate_realtime_connections gauge\n");
        out.push_str(&format!("rowgate_realtime_connections {}\n", m.connections.load(Ordering::Relaxed)));
        out.push_str("# HELP rowgate_realtime_changes_sent_total Database change messages queued for clients.\n# TYPE rowgate_realtime_changes_sent_total counter\n");
        out.push_str(&format!(
            "rowgate_realtime_changes_sent_total {}\n",
            m.delivered.load(Ordering::Relaxed)
        ));
        out.push_str("# HELP rowgate_realtime_slow_clients_total Connections closed for falling behind.\n# TYPE rowgate_realtime_slow_clients_total counter\n");
        out.push_str(&format!(
            "rowgate_realtime_slow_clients_total {}\n",
            m.overflowed.load(Ordering::Relaxed)
        ));
    }
}

/// A caller and its token's expiry.
fn who(principal: Principal) -> Who {
    let exp = serde_json::from_str::<serde_json::Value>(&principal.claims)
        .ok()
        .and_then(|c| c.get("exp").and_then(serde_json::Value::as_f64))
        .map(|e| e as u64);
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        principal.role.hash(&mut h);
        principal.claims.hash(&mut h);
        h.finish()
    };
    Who { principal, exp, key }
}

/// A token's `exp` read without verifying it (only to say how long ago it expired).
fn unverified_exp(token: &str) -> Option<u64> {
    use base64::Engine;
    let body = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(body.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("exp")?.as_f64().map(|e| e as u64)
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
