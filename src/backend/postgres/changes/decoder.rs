//! The change feed from logical decoding of the WAL (where `rowgate cache install` found
//! `wal_level = logical`, or for realtime): a replication connection with a temporary slot
//! streams the `rowgate_cache` publication (and realtime's `supabase_realtime`) through
//! PostgreSQL's built-in `pgoutput` plugin. Unlike the triggers it costs the writing
//! transactions nothing but their WAL, and it reports every committed change, in commit order,
//! together with the instances' messages (`pg_logical_emit_message`): write markers inside
//! their transactions, heartbeats and acknowledgements outside any. One slot serves the
//! response cache and realtime together (`realtime` keeps the rows realtime wants).
//!
//! tokio-postgres speaks no replication protocol, so this is a small client of its own on
//! `postgres-protocol`'s message codecs: start-up, authentication (trust, password, MD5,
//! SCRAM-SHA-256), two commands, then the copy stream. No TLS (like the pool).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::realtime::{Cell, RawChange, RawCommit, RealtimeSide, StreamRelation};
use crate::backend::postgres::tls::{PgTarget, Stream};
use crate::cache::{ResponseCache, CHANNEL};
use crate::realtime::{Feed, Kind};
use crate::schema::QualifiedName;

/// The publication `rowgate cache install` creates for the feed (all tables).
pub const PUBLICATION: &str = "rowgate_cache";

/// Whether the database is set up for the feed: asked on the notification connection.
pub const MODE_SQL: &str = "SELECT current_setting('wal_level') = 'logical' \
     AND EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'rowgate_cache')";

/// A row value longer than this is not kept as a key: the change counts for every value of
/// its column.
const MAX_KEY_LEN: usize = 256;

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

/// One backend message: its tag and body.
struct Frame {
    tag: u8,
    body: Bytes,
}

struct Connection {
    stream: Box<dyn Stream>,
    buf: BytesMut,
    out: BytesMut,
}

impl Connection {
    async fn open(target: &PgTarget) -> Result<Connection, FeedError> {
        use tokio_postgres::config::Host;
        let config = &target.config;
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let stream: Box<dyn Stream> = match config.get_hosts().first() {
            Some(Host::Tcp(host)) => {
                let s = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                s.set_nodelay(true)?;
                target.negotiate(s, host).await?
            }
            #[cfg(unix)]
            Some(Host::Unix(dir)) => {
                Box::new(tokio::net::UnixStream::connect(dir.join(format!(".s.PGSQL.{port}"))).await?)
            }
            _ => Box::new(tokio::net::TcpStream::connect(("localhost", port)).await?),
        };
        let mut conn = Connection { stream, buf: BytesMut::with_capacity(64 * 1024), out: BytesMut::new() };
        let user = config.get_user().unwrap_or("postgres");
        let dbname = config.get_dbname().unwrap_or(user);
        let params = [
            ("user", user),
            ("database", dbname),
            ("replication", "database"),
            ("application_name", "rowgate change feed"),
            // How row values are written as text, for realtime's typed JSON.
            ("DateStyle", "ISO"),
            ("TimeZone", "UTC"),
            ("IntervalStyle", "postgres"),
        ];
        frontend::startup_message(params.iter().copied(), &mut conn.out)?;
        conn.flush().await?;
        conn.authenticate(user, config.get_password().unwrap_or_default()).await?;
        Ok(conn)
    }

    async fn authenticate(&mut self, user: &str, password: &[u8]) -> Result<(), FeedError> {
        let mut scram: Option<ScramSha256> = None;
        loop {
            let frame = self.read().await?;
            match frame.tag {
                b'R' => {
                    let mut body = frame.body;
                    match body.get_i32() {
                        0 => {}
                        3 => frontend::password_message(password, &mut self.out)?,
                        5 => {
                            let salt = [body[0], body[1], body[2], body[3]];
                            let hash =
                                postgres_protocol::authentication::md5_hash(user.as_bytes(), password, salt);
                            frontend::password_message(hash.as_bytes(), &mut self.out)?;
                        }
                        10 => {
                            if !cstrings(&body).any(|m| m == SCRAM_SHA_256) {
                                return Err(FeedError::Protocol("SASL mechanisms (no SCRAM-SHA-256)".into()));
                            }
                            let s = ScramSha256::new(password, ChannelBinding::unsupported());
                            frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut self.out)?;
                            scram = Some(s);
                        }
                        11 => {
                            let s =
                                scram.as_mut().ok_or_else(|| FeedError::Protocol("SASL continue".into()))?;
                            s.update(&body)?;
                            frontend::sasl_response(s.message(), &mut self.out)?;
                        }
                        12 => {
                            let s = scram.as_mut().ok_or_else(|| FeedError::Protocol("SASL final".into()))?;
                            s.finish(&body)?;
                        }
                        other => return Err(FeedError::Protocol(format!("authentication method {other}"))),
                    }
                    self.flush().await?;
                }
                b'Z' => return Ok(()),
                b'S' | b'K' | b'N' => {}
                tag => return Err(FeedError::Protocol(format!("message '{}' during start-up", tag as char))),
            }
        }
    }

    /// Runs a replication command that answers with rows or nothing: the first row's values
    /// as text (a null as empty).
    async fn command(&mut self, sql: &str) -> Result<Vec<String>, FeedError> {
        frontend::query(sql, &mut self.out)?;
        self.flush().await?;
        let mut first = None;
        loop {
            let frame = self.read().await?;
            match frame.tag {
                b'Z' => return Ok(first.unwrap_or_default()),
                b'D' if first.is_none() => first = Some(data_row(frame.body)?),
                b'T' | b'D' | b'C' | b'N' | b'S' => {}
                tag => return Err(FeedError::Protocol(format!("message '{}' after a command", tag as char))),
            }
        }
    }

    async fn flush(&mut self) -> Result<(), FeedError> {
        self.stream.write_all(&self.out).await?;
        self.out.clear();
        Ok(())
    }

    /// The next message; an error response becomes [`FeedError::Server`].
    async fn read(&mut self) -> Result<Frame, FeedError> {
        loop {
            if let Some(frame) = self.buffered()? {
                return Ok(frame);
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(FeedError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }

    /// The next message if it has been received whole already.
    fn buffered(&mut self) -> Result<Option<Frame>, FeedError> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len < 4 {
            return Err(FeedError::Protocol("message length".into()));
        }
        if self.buf.len() <= len {
            self.buf.reserve(len + 1 - self.buf.len());
            return Ok(None);
        }
        let mut message = self.buf.split_to(len + 1).freeze();
        let tag = message.get_u8();
        message.advance(4);
        if tag == b'E' {
            return Err(FeedError::Server(error_text(&message)));
        }
        Ok(Some(Frame { tag, body: message }))
    }

    /// A standby status update: everything up to `lsn` is handled (the slot may move on).
    fn status(&mut self, lsn: u64) -> Result<(), FeedError> {
        let mut data = BytesMut::with_capacity(34);
        data.put_u8(b'r');
        data.put_u64(lsn);
        data.put_u64(lsn);
        data.put_u64(lsn);
        data.put_i64(pg_now());
        data.put_u8(0);
        frontend::CopyData::new(data.freeze())?.write(&mut self.out);
        Ok(())
    }
}

/// Microseconds since 2000-01-01, PostgreSQL's clock.
fn pg_now() -> i64 {
    const PG_EPOCH: u64 = 946_684_800;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    now.as_micros() as i64 - (PG_EPOCH as i64) * 1_000_000
}

/// The NUL-terminated strings of a message body.
fn cstrings(body: &[u8]) -> impl Iterator<Item = &str> {
    body.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| std::str::from_utf8(s).unwrap_or(""))
}

/// A data row's values as text (a null as empty).
fn data_row(mut body: Bytes) -> Result<Vec<String>, FeedError> {
    let short = || FeedError::Protocol("short data row".into());
    if body.remaining() < 2 {
        return Err(short());
    }
    let n = body.get_i16().max(0);
    let mut values = Vec::with_capacity(n as usize);
    for _ in 0..n {
        if body.remaining() < 4 {
            return Err(short());
        }
        let len = body.get_i32();
        let len = usize::try_from(len).unwrap_or(0);
        if body.remaining() < len {
            return Err(short());
        }
        values.push(String::from_utf8_lossy(&body.split_to(len)).into_owned());
    }
    Ok(values)
}

/// An error response's message (field `M`), with its SQLSTATE.
fn error_text(body: &[u8]) -> String {
    let mut message = "";
    let mut code = "";
    for field in body.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let value = std::str::from_utf8(&field[1..]).unwrap_or("");
        match field[0] {
            b'M' => message = value,
            b'C' => code = value,
            _ => {}
        }
    }
    format!("{message} ({code})")
}

/// A relation as the stream described it: per column, its name and whether its values are
/// kept as row keys, and whether it belongs to the replica identity; and for realtime, its
/// names and types.
struct Relation {
    columns: Vec<(Arc<str>, bool, bool)>,
    stream: Arc<StreamRelation>,
}

/// Types whose text form is canonical (see `canonical_text`): int2, int4, int8, text,
/// varchar, uuid.
fn keyed_type(oid: u32) -> bool {
    matches!(oid, 21 | 23 | 20 | 25 | 1043 | 2950)
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
struct Batch {
    /// The transactions it holds.
    xids: Vec<u32>,
    /// Changes to record again, and instance messages to handle, in stream order.
    redo: Vec<Redo>,
    /// Committed transactions' rows for realtime.
    commits: Vec<RawCommit>,
    /// The end of the last commit it holds, in the WAL.
    through: u64,
    /// Where in `redo` the transaction begun and not yet committed starts.
    open_from: Option<usize>,
}

enum Redo {
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

/// Applies one `pgoutput` message: changes at once (and again in [`settle`]); instance messages
/// are left to [`settle`].
fn decode(
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
