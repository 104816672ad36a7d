//! The change feed from logical decoding of the WAL (where `rowgate cache install` found
//! `wal_level = logical`, or for realtime): a replication connection with a temporary slot
//! streams the `rowgate_cache` publication (and realtime's `supabase_realtime`) through
//! PostgreSQL's built-in `pgoutput` plugin. Unlike the triggers it costs the writing
//! transactions nothing but their WAL, and it reports every committed change, in commit order,
//! together with the instances' messages (`pg_logical_emit_message`): write markers inside
//! their transactions, heartbeats and acknowledgements outside any. One slot serves the
//! response cache and realtime together (`realtime` keeps the rows realtime wants).
//!
//! This is the loop: the connection is `replication.rs`'s, its messages `pgoutput.rs`'s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf;
use postgres_protocol::message::frontend;

use super::pgoutput::{decode, Relation};
use super::realtime::{RawCommit, RealtimeSide};
use super::replication::Connection;
use crate::backend::postgres::tls::PgTarget;
use crate::cache::ResponseCache;
use crate::realtime::Feed;

/// The publication `rowgate cache install` creates for the feed (all tables).
pub const PUBLICATION: &str = "rowgate_cache";

/// Whether the database is set up for the feed: asked on the notification connection.
pub const MODE_SQL: &str = "SELECT current_setting('wal_level') = 'logical' \
     AND EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'rowgate_cache')";

/// Why the feed stopped.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The socket failed or closed.
    #[error("replication connection: {0}")]
    Io(#[from] std::io::Error),
    /// PostgreSQL refused something (no REPLICATION privilege, no free slot, ...).
    #[error("replication connection: {0}")]
    Server(String),
    /// A message this client does not understand.
    #[error("replication connection: unexpected {0}")]
    Protocol(String),
    /// The visibility check's query failed.
    #[error("change feed: {0}")]
    Query(#[from] tokio_postgres::Error),
}

/// Streams changes into `cache` and to `realtime` until the connection fails. The cache is
/// flushed once the slot exists (changes committed before it are never reported), and counts
/// as current only when the instance's own heartbeats come back through this stream; realtime
/// is told the feed runs.
pub async fn run(
    target: &PgTarget,
    cache: Option<Arc<ResponseCache>>,
    realtime: Option<Feed>,
) -> Result<(), FeedError> {
    // For the visibility checks (see `settle`).
    let helper = crate::backend::postgres::connect(target).await?;
    let mut publications = Vec::new();
    if cache.is_some() {
        publications.push(PUBLICATION);
    }
    if realtime.is_some() {
        let exists: bool = helper
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1)",
                &[&super::realtime::PUBLICATION],
            )
            .await?
            .get(0);
        if exists {
            publications.push(super::realtime::PUBLICATION);
        } else {
            tracing::error!("realtime-enabled, but the publication supabase_realtime does not exist: run `rowgate realtime install`");
        }
    }
    if publications.is_empty() {
        return Err(FeedError::Server("no publication to stream: run `rowgate realtime install`".into()));
    }
    let mut realtime = realtime.map(RealtimeSide::new);
    let mut conn = Connection::open(target).await?;
    // Numbered: the previous connection's slot may linger until the server notices it gone.
    static CONNECTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let instance = match &cache {
        Some(c) => c.instance.clone(),
        None => {
            let mut id = [0u8; 6];
            let _ = getrandom::fill(&mut id);
            crate::hex(&id)
        }
    };
    let slot = format!("rowgate_{instance}_{n}");
    // A temporary slot: it goes when the connection does, and a new one starts at the present.
    // Its consistent point: commits that end after it are streamed, the others never are.
    let created = conn
        .command(&format!("CREATE_REPLICATION_SLOT {slot} TEMPORARY LOGICAL pgoutput NOEXPORT_SNAPSHOT"))
        .await?;
    // The answer's columns: slot_name, consistent_point, snapshot_name, output_plugin.
    let consistent = created.get(1).and_then(|lsn| crate::lsn::parse(lsn));
    if consistent.is_none() {
        tracing::warn!(answer = ?created, "no consistent point in the slot's answer: cache misses read on the primary");
    }
    frontend::query(
        &format!(
            "START_REPLICATION SLOT {slot} LOGICAL 0/0 (proto_version '1', publication_names '{}', messages 'true')",
            publications.join(",")
        ),
        &mut conn.out,
    )?;
    conn.flush().await?;
    match conn.read().await?.tag {
        b'W' => {}
        tag => {
            return Err(FeedError::Protocol(format!("message '{}' instead of the copy stream", tag as char)))
        }
    }
    if let Some(cache) = &cache {
        // A replica that has replayed the commits before the consistent point is as current
        // as the cache (see `Changes::applied`); without the point, only the primary is.
        match consistent {
            Some(lsn) => cache.changes.applying_through(lsn),
            None => cache.changes.forget_applied(),
        }
        cache.flush();
        cache.listening();
    }
    if let Some(rt) = &realtime {
        // Alone, realtime's publication is the stream: pgoutput sends only its tables' changes.
        rt.feed.only_published(publications == [super::realtime::PUBLICATION]);
        rt.feed.ready();
    }
    tracing::info!(slot, publications = %publications.join(","), "reading changes from logical decoding");
    let mut relations: HashMap<u32, Relation> = HashMap::new();
    let mut open = RawCommit::default();
    let (mut carried, mut open_from): (Vec<Redo>, Option<usize>) = (Vec::new(), None);
    let mut received = 0u64;
    let mut acked = 0u64;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let frame = tokio::select! {
            frame = conn.read() => frame?,
            _ = tick.tick() => {
                if received > acked {
                    conn.status(received)?;
                    conn.flush().await?;
                    acked = received;
                }
                continue;
            }
        };
        // Everything received already makes one batch, settled together, with the changes of
        // a transaction whose commit had not been received by the last one.
        let mut batch =
            Batch { redo: std::mem::take(&mut carried), open_from: open_from.map(|_| 0), ..Batch::default() };
        let mut next = Some(frame);
        while let Some(frame) = next {
            if frame.tag != b'd' {
                return Err(FeedError::Protocol(format!(
                    "message '{}' in the copy stream",
                    frame.tag as char
                )));
            }
            let mut data = frame.body;
            match data.first() {
                Some(b'w') if data.len() >= 25 => {
                    data.advance(1);
                    let _start = data.get_u64();
                    received = received.max(data.get_u64());
                    data.advance(8);
                    let feed = realtime.as_ref().map(|r| &r.feed);
                    decode(&mut relations, cache.as_deref(), feed, data, &mut batch, &mut open)?;
                }
                Some(b'k') if data.len() >= 18 => {
                    data.advance(1);
                    received = received.max(data.get_u64());
                    data.advance(8);
                    if data.get_u8() == 1 {
                        conn.status(received)?;
                        conn.flush().await?;
                        acked = received;
                    }
                }
                _ => return Err(FeedError::Protocol("copy data".into())),
            }
            next = conn.buffered()?;
        }
        // A transaction cut by the batch's end is re-recorded with the batch holding its commit,
        // whose position covers it (see `Changes::applied`).
        open_from = batch.open_from;
        if let Some(from) = open_from {
            carried = batch.redo.split_off(from);
        }
        settle(&helper, cache.as_deref(), realtime.as_mut(), batch).await?;
    }
}

/// What a batch of the stream leaves to do once its transactions are visible.
#[derive(Default)]
pub(super) struct Batch {
    /// The transactions it holds.
    pub(super) xids: Vec<u32>,
    /// Changes to record again, and instance messages to handle, in stream order.
    pub(super) redo: Vec<Redo>,
    /// Committed transactions' rows for realtime.
    pub(super) commits: Vec<RawCommit>,
    /// The end of the last commit it holds, in the WAL.
    pub(super) through: u64,
    /// Where in `redo` the transaction begun and not yet committed starts.
    pub(super) open_from: Option<usize>,
}

pub(super) enum Redo {
    Columns(u32, Vec<(Arc<str>, Vec<String>)>, Vec<Arc<str>>),
    Table(u32),
    Notify(String),
}

/// Finishes a batch. The stream sends a transaction once its commit is in the WAL, which is a
/// moment before new snapshots see it: a query started in that moment reads the old rows, and
/// its answer would be stored as current since the change arrived before the query started.
/// So the changes, recorded on arrival, are recorded again once a fresh snapshot shows every
/// transaction of the batch finished; only then are the batch's markers, acknowledgements and
/// heartbeats handled, since they vouch for everything before them.
async fn settle(
    helper: &tokio_postgres::Client,
    cache: Option<&ResponseCache>,
    realtime: Option<&mut RealtimeSide>,
    batch: Batch,
) -> Result<(), FeedError> {
    if batch.redo.is_empty() && batch.commits.is_empty() {
        return Ok(());
    }
    let xids = batch.xids;
    if !xids.is_empty() {
        loop {
            let snapshot: String =
                helper.query_one("SELECT pg_catalog.pg_current_snapshot()::text", &[]).await?.get(0);
            if xids.iter().all(|x| finished(&snapshot, *x)) {
                break;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    if let Some(cache) = cache {
        cache.changes.applying_through(batch.through);
        for redo in batch.redo {
            match redo {
                Redo::Columns(table, carried, unknown) => cache.columns_changed(table, carried, unknown),
                Redo::Table(table) => cache.table_changed(table),
                Redo::Notify(payload) => cache.notified(&payload),
            }
        }
    }
    // Realtime checks subscribers' rights by reading the rows: only once they are visible.
    if let Some(rt) = realtime {
        rt.hand_over(helper, batch.commits).await?;
    }
    Ok(())
}

/// Whether the transaction `xid` (32 bits, as the stream gives it) is no longer running in
/// `snapshot` (`pg_current_snapshot()`: `xmin:xmax:xip,...`, 64-bit ids).
fn finished(snapshot: &str, xid: u32) -> bool {
    let mut parts = snapshot.split(':');
    let (Some(xmin), Some(xmax), xip) = (parts.next(), parts.next(), parts.next().unwrap_or("")) else {
        return false;
    };
    let (Ok(xmin), Ok(xmax)) = (xmin.parse::<u64>(), xmax.parse::<u64>()) else { return false };
    // The full id: xmax's epoch, or the one before if that puts it past xmax.
    let mut full = (xmax & !0xffff_ffff) | u64::from(xid);
    if full >= xmax {
        match full.checked_sub(1 << 32) {
            Some(f) => full = f,
            None => return false,
        }
    }
    full < xmin || !xip.split(',').filter(|x| !x.is_empty()).any(|x| x.parse::<u64>() == Ok(full))
}

#[cfg(test)]
mod tests {
    use super::finished;

    #[test]
    fn a_transaction_is_finished_unless_a_fresh_snapshot_still_lists_it() {
        assert!(finished("100:105:102,103", 101));
        assert!(!finished("100:105:102,103", 102));
        assert!(finished("100:105:", 99));
        // Ids carry an epoch in the snapshot, not in the stream.
        let epoch = 1u64 << 32;
        assert!(finished(&format!("{}:{}:", epoch + 4, epoch + 9), 5));
        assert!(!finished(&format!("{}:{}:{}", epoch + 4, epoch + 9, epoch + 5), 5));
        assert!(finished(&format!("{}:{}:", epoch + 4, epoch + 9), u32::MAX));
    }
}
