//! The realtime fan-out load (`bench/realtime`): N subscribers to one table's inserts —
//! WebSockets speaking Supabase Realtime's protocol to rowgate, or Server-Sent Events to
//! PocketBase's `/api/realtime` — and a writer inserting rows at a fixed rate through the HTTP
//! API. Each row carries the time its write started (`sent_at`, microseconds since the epoch),
//! so every delivery's latency is measured from the write's start to the subscriber.
//!
//! ```text
//! realtime_load --target rowgate|pocketbase --addr 127.0.0.1:PORT --subscribers N --rate R
//!               --seconds S (--token T | --tokens FILE) --writer-token W [--hold S] [--connect-rate C]
//! ```
//!
//! With `--tokens`, subscriber i uses the file's line i (as many users as lines).
//!
//! Prints `subscribed` on a line of its own once every subscriber is in (then holds `--hold`
//! seconds, idle, for the runner to read the server's memory), and at the end one JSON object:
//! writes, deliveries expected and received, latency percentiles, delivered messages/s.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// Latencies in a log-linear histogram: 64 buckets per power of two of microseconds.
struct Histogram {
    buckets: Vec<AtomicU64>,
    max: AtomicU64,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram { buckets: (0..64 * 40).map(|_| AtomicU64::new(0)).collect(), max: AtomicU64::new(0) }
    }

    fn index(us: u64) -> usize {
        if us < 64 {
            return us as usize;
        }
        let power = 63 - us.leading_zeros() as usize; // ≥ 6
        let sub = ((us >> (power - 6)) & 63) as usize;
        (power - 5) * 64 + sub
    }

    fn lower(i: usize) -> u64 {
        if i < 64 {
            return i as u64;
        }
        let (power, sub) = (i / 64 + 5, (i % 64) as u64);
        (64 + sub) << (power - 6)
    }

    fn record(&self, us: u64) {
        let i = Self::index(us).min(self.buckets.len() - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(us, Ordering::Relaxed);
    }

    fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The latency (ms) below which fraction `q` of the recorded ones fall.
    fn quantile_ms(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let want = (q * total as f64).ceil() as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= want {
                return Self::lower(i + 1) as f64 / 1000.0;
            }
        }
        self.max.load(Ordering::Relaxed) as f64 / 1000.0
    }
}

struct Settings {
    pocketbase: bool,
    addr: String,
    subscribers: usize,
    rate: f64,
    seconds: f64,
    tokens: Vec<String>,
    writer_token: String,
    hold: f64,
    connect_rate: f64,
}

fn usage() -> ! {
    eprintln!(
        "usage: realtime_load --target rowgate|pocketbase --addr HOST:PORT --subscribers N --rate R \
         --seconds S (--token T | --tokens FILE) --writer-token W [--hold S] [--connect-rate C]"
    );
    std::process::exit(2)
}

fn settings() -> Settings {
    let mut s = Settings {
        pocketbase: false,
        addr: String::new(),
        subscribers: 100,
        rate: 100.0,
        seconds: 10.0,
        tokens: Vec::new(),
        writer_token: String::new(),
        hold: 0.0,
        connect_rate: 2000.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| usage());
        let num = |v: &str| v.parse::<f64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--target" => s.pocketbase = v == "pocketbase",
            "--addr" => s.addr = v,
            "--subscribers" => s.subscribers = num(&v) as usize,
            "--rate" => s.rate = num(&v),
            "--seconds" => s.seconds = num(&v),
            "--token" => s.tokens = vec![v],
            "--tokens" => {
                let text = std::fs::read_to_string(&v).unwrap_or_else(|_| usage());
                s.tokens = text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
            }
            "--writer-token" => s.writer_token = v,
            "--hold" => s.hold = num(&v),
            "--connect-rate" => s.connect_rate = num(&v),
            _ => usage(),
        }
    }
    if s.addr.is_empty() || s.tokens.is_empty() {
        usage()
    }
    s
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// The `sent_at` of a delivered row, found in the message's text.
fn sent_at(text: &str) -> Option<u64> {
    let at = text.find("\"sent_at\":")? + "\"sent_at\":".len();
    let digits: String =
        text[at..].chars().skip_while(|c| *c == ' ').take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

struct Shared {
    histogram: Histogram,
    joined: AtomicUsize,
    failed: AtomicUsize,
    /// Deliveries not counted once the writes stop (no more expected).
    stop: AtomicU64,
    /// Error messages received (the first few are printed).
    complaints: AtomicUsize,
    /// Deliveries per subscriber.
    received: Vec<AtomicU64>,
}

/// One rowgate subscriber: a WebSocket, a join, heartbeats, and the changes.
async fn rowgate_subscriber(s: Arc<Settings>, shared: Arc<Shared>, i: usize) {
    let token = &s.tokens[i % s.tokens.len()];
    let url = format!("ws://{}/realtime/v1/websocket?apikey={token}&vsn=1.0.0", s.addr);
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(url).await else {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let join = serde_json::json!({
        "topic": "realtime:fanout", "event": "phx_join", "ref": "1", "join_ref": "1",
        "payload": {"config": {"broadcast": {"self": false}, "presence": {"enabled": false},
                               "postgres_changes": [{"event": "INSERT", "schema": "public", "table": "messages"}]},
                    "access_token": token}
    });
    if ws.send(Message::text(join.to_string())).await.is_err() {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut heartbeat = tokio::time::interval(Duration::from_secs(25));
    heartbeat.tick().await;
    let mut n = 2u64;
    loop {
        tokio::select! {
            m = ws.next() => match m {
                Some(Ok(Message::Text(t))) => {
                    let t = t.as_str();
                    if let Some(sent) = sent_at(t) {
                        shared.histogram.record(now_us().saturating_sub(sent));
                        shared.received[i].fetch_add(1, Ordering::Relaxed);
                    } else if t.contains("Subscribed to PostgreSQL") {
                        shared.joined.fetch_add(1, Ordering::Relaxed);
                    } else if t.contains("\"status\":\"error\"") && shared.complaints.fetch_add(1, Ordering::Relaxed) < 5 {
                        eprintln!("realtime_load: {t}");
                    }
                }
                Some(Ok(_)) => {}
                _ => {
                    if shared.stop.load(Ordering::Relaxed) == 0 {
                        shared.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
            },
            _ = heartbeat.tick() => {
                let hb = format!(r#"{{"topic":"phoenix","event":"heartbeat","payload":{{}},"ref":"{n}"}}"#);
                n += 1;
                if ws.send(Message::text(hb)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One PocketBase subscriber: an event stream, its client id posted with the subscription,
/// and the records.
async fn pocketbase_subscriber(s: Arc<Settings>, shared: Arc<Shared>, i: usize) {
    let token = &s.tokens[i % s.tokens.len()];
    let Ok(stream) = TcpStream::connect(&s.addr).await else {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let _ = stream.set_nodelay(true);
    let Ok((mut sender, conn)) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(hyper_util::rt::TokioIo::new(stream)).await
    else {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    tokio::spawn(conn);
    let req = http::Request::get("/api/realtime")
        .header("host", &s.addr)
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let Ok(resp) = sender.send_request(req).await else {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let mut body = resp.into_body();
    let mut buf = String::new();
    let mut subscribed = false;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Some(chunk) = frame.data_ref() else { continue };
        buf.push_str(&String::from_utf8_lossy(chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            if !subscribed {
                let Some(id) = event.split("\"clientId\":\"").nth(1).and_then(|r| r.split('"').next()) else {
                    continue;
                };
                let body = serde_json::json!({"clientId": id, "subscriptions": ["messages"]}).to_string();
                if post(&s.addr, "/api/realtime", token, body).await != Some(204) {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                subscribed = true;
                shared.joined.fetch_add(1, Ordering::Relaxed);
            } else if let Some(sent) = sent_at(&event) {
                shared.histogram.record(now_us().saturating_sub(sent));
                shared.received[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    if shared.stop.load(Ordering::Relaxed) == 0 {
        shared.failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// One POST on a connection of its own; its status.
async fn post(addr: &str, path: &str, token: &str, body: String) -> Option<u16> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(hyper_util::rt::TokioIo::new(stream))
            .await
            .ok()?;
    tokio::spawn(conn);
    let req = http::Request::post(path)
        .header("host", addr)
        .header("content-type", "application/json")
        .header("authorization", token)
        .body(Full::new(Bytes::from(body)))
        .ok()?;
    let resp = sender.send_request(req).await.ok()?;
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    Some(status)
}

/// Keep-alive connections for the writes, each used by one write at a time.
struct Writer {
    senders: tokio::sync::Mutex<Vec<hyper::client::conn::http1::SendRequest<Full<Bytes>>>>,
}

impl Writer {
    async fn write(&self, s: &Settings) -> bool {
        let sender = self.senders.lock().await.pop();
        let mut sender = match sender {
            Some(sd) => sd,
            None => {
                let Ok(stream) = TcpStream::connect(&s.addr).await else { return false };
                let _ = stream.set_nodelay(true);
                let Ok((sender, conn)) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
                else {
                    return false;
                };
                tokio::spawn(conn);
                sender
            }
        };
        let body = format!(r#"{{"body":"hello, everyone","sent_at":{}}}"#, now_us());
        let (path, auth) = if s.pocketbase {
            ("/api/collections/messages/records", s.writer_token.clone())
        } else {
            ("/rest/v1/messages", format!("Bearer {}", s.writer_token))
        };
        let req = http::Request::post(path)
            .header("host", &s.addr)
            .header("content-type", "application/json")
            .header("authorization", auth)
            .header("apikey", &s.writer_token)
            .header("prefer", "return=minimal")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let Ok(resp) = sender.send_request(req).await else { return false };
        let ok = resp.status().is_success();
        let _ = resp.into_body().collect().await;
        self.senders.lock().await.push(sender);
        ok
    }
}

#[tokio::main]
async fn main() {
    let s = Arc::new(settings());
    let shared = Arc::new(Shared {
        histogram: Histogram::new(),
        joined: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        stop: AtomicU64::new(0),
        complaints: AtomicUsize::new(0),
        received: (0..s.subscribers).map(|_| AtomicU64::new(0)).collect(),
    });
    let started = Instant::now();
    let pace = Duration::from_secs_f64(1.0 / s.connect_rate.max(1.0));
    for i in 0..s.subscribers {
        let (s2, sh) = (s.clone(), shared.clone());
        if s.pocketbase {
            tokio::spawn(pocketbase_subscriber(s2, sh, i));
        } else {
            tokio::spawn(rowgate_subscriber(s2, sh, i));
        }
        tokio::time::sleep(pace).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while shared.joined.load(Ordering::Relaxed) + shared.failed.load(Ordering::Relaxed) < s.subscribers {
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let connect_s = started.elapsed().as_secs_f64();
    let joined = shared.joined.load(Ordering::Relaxed);
    println!("subscribed {joined}");
    tokio::time::sleep(Duration::from_secs_f64(s.hold)).await;

    let writer = Arc::new(Writer { senders: tokio::sync::Mutex::new(Vec::new()) });
    let (writes, write_errors) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / s.rate.max(0.001)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let began = Instant::now();
    let total = (s.rate * s.seconds).round() as usize;
    let mut tasks = Vec::with_capacity(total);
    // A write not answered within the load's time and half a minute counts as failed: a server
    // that falls that far behind is not waited for.
    let give_up = tokio::time::Instant::now() + Duration::from_secs_f64(s.seconds + 30.0);
    for _ in 0..total {
        tick.tick().await;
        let (w, s2, ok, bad) = (writer.clone(), s.clone(), writes.clone(), write_errors.clone());
        tasks.push(tokio::spawn(async move {
            match tokio::time::timeout_at(give_up, w.write(&s2)).await {
                Ok(true) => ok.fetch_add(1, Ordering::Relaxed),
                _ => bad.fetch_add(1, Ordering::Relaxed),
            };
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let writing_s = began.elapsed().as_secs_f64();
    // Deliveries still on their way.
    let written = writes.load(Ordering::Relaxed) as u64;
    let expected = written * joined as u64;
    let drain = Instant::now() + Duration::from_secs(10);
    while shared.histogram.count() < expected && Instant::now() < drain {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shared.stop.store(1, Ordering::Relaxed);
    let delivered = shared.histogram.count();
    let h = &shared.histogram;
    let out = serde_json::json!({
        "target": if s.pocketbase { "pocketbase" } else { "rowgate" },
        "subscribers": s.subscribers,
        "subscribed": joined,
        "subscribe_failures": shared.failed.load(Ordering::Relaxed),
        "connect_s": connect_s,
        "rate": s.rate,
        "writes": written,
        "write_errors": write_errors.load(Ordering::Relaxed),
        "writing_s": writing_s,
        "expected": expected,
        "delivered": delivered,
        "missing": expected.saturating_sub(delivered),
        "least_received": shared.received.iter().map(|r| r.load(Ordering::Relaxed)).min().unwrap_or(0),
        "most_received": shared.received.iter().map(|r| r.load(Ordering::Relaxed)).max().unwrap_or(0),
        "delivered_per_s": if writing_s > 0.0 { delivered as f64 / writing_s } else { 0.0 },
        "latency_ms": {
            "p50": h.quantile_ms(0.50), "p90": h.quantile_ms(0.90), "p99": h.quantile_ms(0.99),
            "max": h.max.load(Ordering::Relaxed) as f64 / 1000.0,
        },
    });
    println!("{out}");
    std::process::exit(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_trip() {
        for us in [0, 1, 63, 64, 65, 100, 1000, 12345, 999_999, 10_000_000] {
            let i = Histogram::index(us);
            assert!(Histogram::lower(i) <= us && us < Histogram::lower(i + 1).max(us + 1), "{us}");
        }
        assert_eq!(sent_at(r#"{"record":{"body":"x","sent_at":1234567}}"#), Some(1234567));
    }
}
