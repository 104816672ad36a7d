//! One WebSocket connection: its channels (joined topics), the messages it sends (heartbeats,
//! joins, leaves, broadcasts, presence, token refreshes), and what it is sent: replies at
//! once, everything else through its bounded [`Outbox`]. A connection that sends nothing for
//! a minute, overflows its outbox or stops reading is closed; a channel whose token expires is
//! closed with Supabase's message.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::frame::{self, BroadcastBody, InPayload, Inbound, Outbound, Vsn};
use super::hub::{Outbox, PgChannel, Stop, Who};
use super::join::{self, JoinConfig};
use super::Realtime;

/// A connection that sends nothing (not even a heartbeat, every 25 s) for this long is closed,
/// as Phoenix's transport times out.
const IDLE: Duration = Duration::from_secs(60);

/// A channel's `postgres_changes` bindings at most (each is tested against every change).
const MAX_BINDINGS: usize = 100;

/// A connection's bindings at most, over all its channels.
const MAX_CONNECTION_BINDINGS: usize = 1000;

/// The memory a connection's filter patterns may hold, over all its channels (each pattern's
/// automaton and its cache).
const MAX_PATTERN_MEMORY: usize = 2 * 1024 * 1024;

/// The presence payloads a connection may have tracked at once, over all its channels, as
/// JSON bytes: what it tracks is held for every member of its topics to be sent.
const MAX_PRESENCE_BYTES: usize = 64 * 1024;

/// How long one write to a client may take before the client counts as gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A joined channel.
struct Joined {
    join_ref: Arc<str>,
    topic: Arc<str>,
    ack: bool,
    presence_key: String,
    /// The size of the presence payload it tracks (0: none).
    tracked: usize,
    who: Who,
    token: Option<String>,
    pg: Option<Arc<PgChannel>>,
}

/// A connection's state.
struct Connection {
    rt: Arc<Realtime>,
    outbox: Arc<Outbox>,
    /// Who the socket's own credentials (its `apikey`) make it.
    base: Who,
    channels: HashMap<Arc<str>, Joined>,
    /// Messages this second, for `realtime-max-events-per-second`.
    window: (Instant, u32),
    /// What to write before reading on.
    out: Vec<Message>,
    /// The channels or their tokens changed: their soonest expiry is to be read again.
    expiry_changed: bool,
}

/// Serves one upgraded connection until it closes.
pub async fn serve<S>(rt: Arc<Realtime>, ws: tokio_tungstenite::WebSocketStream<S>, vsn: Vsn, base: Who)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let id = rt.next_connection();
    let (outbox, mut queue) = Outbox::new(id, vsn, rt.settings.queue);
    let mut conn = Connection {
        rt,
        outbox: outbox.clone(),
        base,
        channels: HashMap::new(),
        window: (Instant::now(), 0),
        out: Vec::new(),
        expiry_changed: false,
    };
    let (mut sink, mut stream) = ws.split();
    let idle = tokio::time::sleep(IDLE);
    tokio::pin!(idle);
    // The soonest token expiry of the joined channels, re-read only when they change.
    let mut expiry = conn.next_expiry();
    let expire = tokio::time::sleep_until(expiry.unwrap_or_else(far_future));
    tokio::pin!(expire);
    let reason = loop {
        tokio::select! {
            // A connection that fell behind is closed before anything else is done for it.
            biased;
            () = outbox.wake.notified() => {
                conn.rt.metrics.overflowed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match outbox.stopped() {
                    Some(Stop::SlowFilters) => {
                        conn.system_all("This client's filters take too long to match: use fewer or simpler patterns");
                        break Some((CloseCode::Policy, "filters too slow"));
                    }
                    _ => {
                        conn.system_all("Too many messages queued for this client: it is not reading fast enough");
                        break Some((CloseCode::Again, "slow consumer"));
                    }
                }
            }
            frame = stream.next() => {
                let inbound = match frame {
                    Some(Ok(Message::Text(t))) => frame::decode_text(vsn, t.as_str()),
                    Some(Ok(Message::Binary(b))) => frame::decode_binary(&b),
                    Some(Ok(Message::Close(_))) | None => break None,
                    Some(Ok(_)) => continue, // ping/pong: answered by the library
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "realtime connection failed");
                        break None;
                    }
                };
                idle.as_mut().reset(tokio::time::Instant::now() + IDLE);
                match inbound {
                    Ok(m) => conn.handle(m).await,
                    // Ignored, as Supabase's server does now (it used to drop the socket).
                    Err(e) => tracing::debug!(error = %e, "realtime: malformed message ignored"),
                }
            }
            Some(m) = queue.recv() => {
                conn.out.push(m);
                while conn.out.len() < 64 {
                    match queue.try_recv() {
                        Ok(m) => conn.out.push(m),
                        Err(_) => break,
                    }
                }
            }
            () = &mut idle => break Some((CloseCode::Away, "idle")),
            () = &mut expire, if expiry.is_some() => conn.expire(),
        }
        if conn.expiry_changed {
            conn.expiry_changed = false;
            expiry = conn.next_expiry();
            expire.as_mut().reset(expiry.unwrap_or_else(far_future));
        }
        if !conn.out.is_empty() && !write(&mut sink, &mut conn.out).await {
            break None;
        }
    };
    if let Some((code, why)) = reason {
        conn.out.push(Message::Close(Some(CloseFrame { code, reason: why.into() })));
        let _ = write(&mut sink, &mut conn.out).await;
    }
    conn.rt.hub.drop_connection(id, conn.channels.keys().cloned());
}

/// A deadline that never comes (a timer with nothing to expire).
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365)
}

/// Writes (and takes) `messages`, then flushes; false if the client is gone or too slow.
async fn write<S>(sink: &mut S, messages: &mut Vec<Message>) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    let send = async {
        for m in messages.drain(..) {
            sink.feed(m).await?;
        }
        sink.flush().await
    };
    matches!(tokio::time::timeout(WRITE_TIMEOUT, send).await, Ok(Ok(())))
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Connection {
    fn vsn(&self) -> Vsn {
        self.outbox.vsn
    }

    fn reply(&mut self, m: &Inbound, ok: bool, response: &str) {
        let out = Outbound::Reply {
            topic: &m.topic,
            join_ref: m.join_ref.as_deref(),
            msg_ref: m.msg_ref.as_deref(),
            ok,
            response,
        };
        self.out.extend(out.encode(self.vsn()));
    }

    fn push(&mut self, topic: &str, join_ref: &str, event: &str, payload: &str) {
        let out = Outbound::Push { topic, join_ref: Some(join_ref), event, payload };
        self.out.extend(out.encode(self.vsn()));
    }

    /// A `system` message of the `system` extension, and `phx_close`: the channel is gone.
    fn shut(&mut self, topic: &Arc<str>, message: &str) {
        if let Some(joined) = self.channels.remove(topic) {
            let payload = json!({
                "channel": topic.strip_prefix("realtime:").unwrap_or(topic),
                "extension": "system",
                "message": message,
                "status": "error",
            })
            .to_string();
            self.push(topic, &joined.join_ref, "system", &payload);
            let close = Outbound::Lifecycle { topic, join_ref: Some(&joined.join_ref), event: "phx_close" };
            self.out.extend(close.encode(self.vsn()));
            self.rt.hub.leave(topic, self.outbox.id);
        }
    }

    /// Tells every channel why the connection is being closed.
    fn system_all(&mut self, message: &str) {
        let topics: Vec<(Arc<str>, Arc<str>)> =
            self.channels.values().map(|j| (j.topic.clone(), j.join_ref.clone())).collect();
        for (topic, join_ref) in topics {
            let payload = json!({
                "channel": topic.strip_prefix("realtime:").unwrap_or(&topic),
                "extension": "system",
                "message": message,
                "status": "error",
            })
            .to_string();
            self.push(&topic, &join_ref, "system", &payload);
        }
    }

    fn next_expiry(&self) -> Option<tokio::time::Instant> {
        let exp = self.channels.values().filter_map(|j| j.who.exp).min()?;
        let wait = exp.saturating_sub(now());
        Some(tokio::time::Instant::now() + Duration::from_secs(wait))
    }

    fn expire(&mut self) {
        self.expiry_changed = true;
        let now = now();
        let expired: Vec<(Arc<str>, u64)> = self
            .channels
            .values()
            .filter_map(|j| j.who.exp.filter(|e| *e <= now).map(|e| (j.topic.clone(), e)))
            .collect();
        for (topic, exp) in expired {
            self.shut(&topic, &format!("Token has expired {} seconds ago", now - exp));
        }
    }

    /// Whether this message is within `realtime-max-events-per-second`.
    fn admit(&mut self) -> bool {
        let limit = self.rt.settings.max_events_per_second;
        if self.window.0.elapsed() >= Duration::from_secs(1) {
            self.window = (Instant::now(), 0);
        }
        self.window.1 += 1;
        self.window.1 <= limit
    }

    async fn handle(&mut self, m: Inbound) {
        if m.topic != "phoenix" {
            // A join, leave, token or shut channel may move the soonest expiry.
            self.expiry_changed = true;
        }
        if m.topic == "phoenix" {
            if m.event == "heartbeat" {
                self.reply(&m, true, "{}");
            }
            return;
        }
        if !self.admit() {
            if let Some(topic) = self.channels.get(m.topic.as_str()).map(|j| j.topic.clone()) {
                self.shut(&topic, "Too many messages per second");
            }
            return;
        }
        match (m.event.as_str(), self.channels.contains_key(m.topic.as_str())) {
            ("phx_join", _) => self.join(m).await,
            ("phx_leave", _) => {
                self.reply(&m, true, "{}");
                if let Some(joined) = self.channels.remove(m.topic.as_str()) {
                    let close = Outbound::Lifecycle {
                        topic: &joined.topic,
                        join_ref: Some(&joined.join_ref),
                        event: "phx_close",
                    };
                    self.out.extend(close.encode(self.vsn()));
                    self.rt.hub.leave(&joined.topic, self.outbox.id);
                }
            }
            (_, false) => self.reply(&m, false, r#"{"reason":"unmatched topic"}"#),
            ("broadcast", true) => self.broadcast(m),
            ("presence", true) => self.presence(m),
            ("access_token", true) => self.access_token(m).await,
            // Unknown events on a joined channel are ignored, as Supabase's channel does.
            _ => {}
        }
    }

    /// Why `new` bindings would take this connection past its budget, if they would: every
    /// binding is tested against every change, and a pattern holds memory.
    fn over_budget(&self, new: &[super::hub::Binding]) -> Option<String> {
        let held = self.channels.values().filter_map(|j| j.pg.as_ref()).flat_map(|pg| pg.bindings.iter());
        let (count, memory) = held.chain(new).fold((0, 0), |(n, bytes), b| (n + 1, bytes + b.filter.cost()));
        if count > MAX_CONNECTION_BINDINGS {
            return Some(format!(
                "Too many postgres_changes bindings: at most {MAX_CONNECTION_BINDINGS} per connection"
            ));
        }
        (memory > MAX_PATTERN_MEMORY).then(|| {
            format!(
                "Too many filter patterns: at most {} KiB of them per connection",
                MAX_PATTERN_MEMORY / 1024
            )
        })
    }

    async fn join(&mut self, m: Inbound) {
        let Some(name) = m.topic.strip_prefix("realtime:") else {
            return self.reply(&m, false, r#"{"reason":"unmatched topic"}"#);
        };
        if name.is_empty() {
            return self.reply(&m, false, r#"{"reason":"TopicNameRequired: You must provide a topic name"}"#);
        }
        let topic: Arc<str> = Arc::from(m.topic.as_str());
        // A second join of a topic replaces the first (the client rejoined).
        if let Some(old) = self.channels.remove(&topic) {
            let close =
                Outbound::Lifecycle { topic: &topic, join_ref: Some(&old.join_ref), event: "phx_close" };
            self.out.extend(close.encode(self.vsn()));
            self.rt.hub.leave(&topic, self.outbox.id);
        }
        if self.channels.len() >= self.rt.settings.max_channels {
            return self.reply(&m, false, r#"{"reason":"ChannelRateLimitReached: Too many channels"}"#);
        }
        let InPayload::Json(payload) = &m.payload else { return };
        let config: JoinConfig = join::config(payload);
        if config.private {
            return self.reply(
                &m,
                false,
                r#"{"reason":"PrivateChannelsUnsupported: rowgate serves public channels only (see docs/realtime.md)"}"#,
            );
        }
        let who = match self.who(config.access_token.as_deref()) {
            Ok(who) => who,
            Err(reason) => return self.reply(&m, false, &json!({ "reason": reason }).to_string()),
        };
        tracing::debug!(topic = %topic, role = %who.principal.role, "realtime: join");
        let join_ref: Arc<str> =
            Arc::from(m.join_ref.clone().or_else(|| m.msg_ref.clone()).unwrap_or_default());
        // Every binding, or none: a bad one is reported after the reply (as Supabase does).
        let mut entries = Vec::with_capacity(config.postgres_changes.len());
        let mut bindings = Vec::with_capacity(config.postgres_changes.len());
        let mut problem = (config.postgres_changes.len() > MAX_BINDINGS)
            .then(|| format!("Too many postgres_changes bindings: at most {MAX_BINDINGS} per channel"));
        let schema = self.rt.schema.load();
        for entry in &config.postgres_changes {
            let mut echoed = entry.clone();
            let id = join::binding_id(entry);
            if let Value::Object(o) = &mut echoed {
                o.insert("id".into(), Value::from(id));
            }
            entries.push(echoed);
            if problem.is_some() {
                continue;
            }
            let checked = match &schema {
                Some(schema) => join::binding(entry, schema, &self.rt.published.load()),
                None => Err("The schema cache is not loaded yet: retrying".into()),
            };
            match checked {
                Ok(b) => bindings.push(b),
                Err(e) => problem = Some(e),
            }
        }
        if problem.is_none() {
            problem = self.over_budget(&bindings);
        }
        if problem.is_none() && !bindings.is_empty() {
            if let Err(e) = self.rt.check_columns(&who.principal, &bindings).await {
                problem = Some(e);
            }
        }
        self.reply(&m, true, &json!({ "postgres_changes": entries }).to_string());
        let pg = match (problem, bindings.is_empty()) {
            (Some(e), _) => {
                let ch = PgChannel {
                    outbox: self.outbox.clone(),
                    topic: topic.clone(),
                    join_ref: join_ref.clone(),
                    bindings: Vec::new(),
                    patterned: false,
                    matching: Mutex::new((Instant::now(), Duration::ZERO)),
                    who: ArcSwap::from_pointee(who.clone()),
                    writer: None,
                };
                self.out.extend(ch.system(false, &e));
                None
            }
            (None, true) => None,
            (None, false) => {
                let ch = Arc::new(PgChannel {
                    outbox: self.outbox.clone(),
                    topic: topic.clone(),
                    join_ref: join_ref.clone(),
                    patterned: bindings.iter().any(|b| b.filter.has_pattern()),
                    matching: Mutex::new((Instant::now(), Duration::ZERO)),
                    bindings,
                    who: ArcSwap::from_pointee(who.clone()),
                    writer: None,
                });
                self.rt.hub.listen(ch.clone());
                self.out.extend(self.rt.subscribed_message(&ch));
                Some(ch)
            }
        };
        self.rt.hub.join(&topic, &self.outbox, config.own);
        let presence_key =
            if config.presence_key.is_empty() { super::presence::new_key() } else { config.presence_key };
        if config.presence {
            let state = self.rt.hub.presence_state(&topic).to_string();
            self.push(&topic, &join_ref, "presence_state", &state);
        }
        let token = config.access_token;
        self.channels.insert(
            topic.clone(),
            Joined { join_ref, topic, ack: config.ack, presence_key, tracked: 0, who, token, pg },
        );
    }

    /// Who a channel acts for: its token, or the socket's credentials. The error is the join's
    /// `reason`.
    fn who(&self, token: Option<&str>) -> Result<Who, String> {
        match token.filter(|t| !t.starts_with("sb_")) {
            None => match self.base.exp.filter(|e| *e <= now()) {
                // The socket's own token has expired since it connected.
                Some(exp) => Err(format!("InvalidJWTToken: Token has expired {} seconds ago", now() - exp)),
                None => Ok(self.base.clone()),
            },
            Some(t) => self.rt.verify(t),
        }
    }

    fn broadcast(&mut self, m: Inbound) {
        let Some(joined) = self.channels.get(m.topic.as_str()) else { return };
        let (topic, ack) = (joined.topic.clone(), joined.ack);
        let (event, body) = match &m.payload {
            InPayload::Broadcast { event, body } => (event.clone(), body.clone()),
            InPayload::Json(p) => {
                let event = p.get("event").and_then(Value::as_str).unwrap_or_default().to_owned();
                let payload = p.get("payload").cloned().unwrap_or(Value::Object(Default::default()));
                match serde_json::value::to_raw_value(&payload) {
                    Ok(raw) => (event, BroadcastBody::Json(raw)),
                    Err(_) => return,
                }
            }
        };
        self.rt.hub.broadcast(&topic, Some(self.outbox.id), &event, &body);
        if ack {
            self.reply(&m, true, "{}");
        }
    }

    fn presence(&mut self, m: Inbound) {
        let InPayload::Json(p) = &m.payload else { return };
        let Some(joined) = self.channels.get(m.topic.as_str()) else { return };
        let (topic, key) = (joined.topic.clone(), joined.presence_key.clone());
        match p.get("event").and_then(Value::as_str).map(str::to_ascii_lowercase).as_deref() {
            Some("track") => match p.get("payload") {
                Some(Value::Object(meta)) => {
                    let size = Value::Object(meta.clone()).to_string().len();
                    let others: usize =
                        self.channels.values().filter(|j| j.topic != topic).map(|j| j.tracked).sum();
                    if others + size > MAX_PRESENCE_BYTES {
                        return self.reply(&m, false, r#"{"reason":"Track message size exceeded"}"#);
                    }
                    self.rt.hub.track(&topic, self.outbox.id, &key, meta);
                    if let Some(joined) = self.channels.get_mut(&topic) {
                        joined.tracked = size;
                    }
                    self.reply(&m, true, "{}");
                }
                _ => self.reply(&m, false, r#"{"reason":"Presence track payload must be a map"}"#),
            },
            Some("untrack") => {
                self.rt.hub.untrack(&topic, self.outbox.id);
                if let Some(joined) = self.channels.get_mut(&topic) {
                    joined.tracked = 0;
                }
                self.reply(&m, true, "{}");
            }
            _ => self.reply(&m, false, "{}"),
        }
    }

    /// A new token for a channel: what it receives from now on is decided by it. A token that
    /// does not verify closes the channel. Never answered, as Supabase's server does not.
    async fn access_token(&mut self, m: Inbound) {
        let InPayload::Json(p) = &m.payload else { return };
        let Some(token) = p.get("access_token").and_then(Value::as_str) else { return };
        let Some(joined) = self.channels.get(m.topic.as_str()) else { return };
        if token.starts_with("sb_") || joined.token.as_deref() == Some(token) {
            return;
        }
        let topic = joined.topic.clone();
        match self.rt.verify(token) {
            Err(reason) => {
                let message = reason.split_once(": ").map_or(reason.as_str(), |(_, m)| m).to_owned();
                self.shut(&topic, &message);
            }
            Ok(who) => {
                let mut pg = joined.pg.clone();
                if let Some(ch) = &pg {
                    let bindings_ok = self.rt.check_columns(&who.principal, &ch.bindings).await;
                    ch.who.store(Arc::new(who.clone()));
                    match bindings_ok {
                        Ok(()) => self.out.extend(self.rt.subscribed_message(ch)),
                        Err(e) => {
                            // The new caller may not read what the bindings filter on: they stop.
                            self.out.extend(ch.system(false, &e));
                            self.rt.hub.unlisten(self.outbox.id, &topic);
                            pg = None;
                        }
                    }
                }
                if let Some(joined) = self.channels.get_mut(&topic) {
                    joined.who = who;
                    joined.token = Some(token.to_owned());
                    joined.pg = pg;
                }
            }
        }
    }
}
