//! What another front door's subscribers — PocketBase's server-sent events at `/api/realtime` —
//! ask of realtime: a connection's bounded outbox, and subscriptions to a table's changes (or one
//! row's) as a caller, delivered by the same dispatcher, under the same rights, as Supabase's
//! channels. The door writes each change in its own protocol ([`ChangeWriter`]); it sees every
//! table of the API's schema, as PocketBase's collections are all realtime, not only those
//! published for Supabase's clients.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde_json::{Map, Value};
use tokio_tungstenite::tungstenite::Message;

use super::filter::{Cmp, Condition, Filter, Op};
use super::frame::Vsn;
use super::hub::{Binding, Outbox, PgChannel, Who};
use super::{Kind, Realtime};
use crate::auth::Principal;
use crate::schema::QualifiedName;

/// Writes a change a subscriber may read as another door's message.
pub trait ChangeWriter: Send + Sync {
    /// The message for a change of `kind` to `table` under the subscription `topic`; `row` is
    /// the row as the subscriber may read it (the old row of a delete).
    fn write(
        &self,
        topic: &str,
        kind: Kind,
        table: &QualifiedName,
        row: &Map<String, Value>,
    ) -> Option<Message>;
}

/// What another door's subscriber asks for: the changes of `table` whose row passes `filter` (a
/// binding's, `column=op.value,...`) — and, given a `record`, whose `id` is it — as `who` may
/// read them (for as long as the subscription lasts), written by `writer` under `topic`.
pub struct DoorSubscription<'a> {
    /// The subscription's name, which its messages carry.
    pub topic: Arc<str>,
    /// Whom it acts for.
    pub who: Principal,
    /// The table.
    pub table: QualifiedName,
    /// One row's `id`, or every row.
    pub record: Option<&'a str>,
    /// The conditions a row must pass.
    pub filter: &'a str,
    /// How its messages are written.
    pub writer: Arc<dyn ChangeWriter>,
}

/// A connection of another door: where its messages queue, and its number.
pub struct DoorConnection {
    /// Its outbox (the dispatcher pushes into it; a connection falling behind is stopped).
    pub outbox: Arc<Outbox>,
    /// The messages to send, in order.
    pub queue: tokio::sync::mpsc::Receiver<Message>,
}

impl Realtime {
    /// Opens a connection for another door, counted with the others; `None` when the server
    /// holds as many as it may.
    pub fn open_door(&self) -> Option<DoorConnection> {
        if self.metrics.connections.load(std::sync::atomic::Ordering::Relaxed) >= self.max_connections as i64
        {
            return None;
        }
        let id = self.next_connection();
        // The serializer is never used: a door's channels are written by their writer.
        let (outbox, queue) = Outbox::new(id, Vsn::V2, self.settings.queue);
        self.metrics.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(DoorConnection { outbox, queue })
    }

    /// The most subscriptions one connection may hold (`realtime-max-channels`): every change is
    /// matched against each.
    pub fn max_subscriptions(&self) -> usize {
        self.settings.max_channels
    }

    /// Ends connection `conn` and its subscriptions (`topics`).
    pub fn close_door(&self, conn: u64, topics: impl Iterator<Item = Arc<str>>) {
        for topic in topics {
            self.hub.unlisten(conn, &topic);
        }
        self.metrics.connections.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Subscribes `outbox`'s connection as `asked`; `Err`: why its filter does not parse.
    pub fn subscribe_door(&self, outbox: &Arc<Outbox>, asked: DoorSubscription<'_>) -> Result<(), String> {
        let DoorSubscription { topic, who, table, record, filter, writer } = asked;
        let mut filter = Filter::parse(filter)?;
        if let Some(id) = record {
            let op = Op::Compare(Cmp::Eq, id.to_owned());
            filter.0.push(Condition { column: "id".into(), negated: false, op });
        }
        let patterned = filter.has_pattern();
        let binding = Binding {
            id: 0,
            event: None,
            schema: Some(table.schema),
            table: Some(table.name),
            filter,
            select: None,
        };
        self.hub.listen(Arc::new(PgChannel {
            outbox: outbox.clone(),
            topic,
            join_ref: Arc::from(""),
            bindings: vec![binding],
            patterned,
            matching: Mutex::new((Instant::now(), Duration::ZERO)),
            // Authorized when it subscribed, as PocketBase's are: its token's expiry ends
            // nothing, where a Supabase channel would be closed.
            who: ArcSwap::from_pointee(Who { exp: None, ..super::who(who) }),
            writer: Some(writer),
        }));
        Ok(())
    }

    /// Ends `conn`'s subscription `topic`.
    pub fn unsubscribe_door(&self, conn: u64, topic: &Arc<str>) {
        self.hub.unlisten(conn, topic);
    }
}
