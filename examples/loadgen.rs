//! Sends a list of HTTP requests, each exactly once, at a fixed concurrency, and reports the wall
//! time to complete them all — the way PocketBase's benchmark runner measures
//! (`bench/WORKLOADS.md`, s004). oha picks requests at random from a list, which cannot express
//! "delete these 100 rows" or "spend these 1,000 refresh tokens"; this can.
//!
//! ```text
//! loadgen --addr 127.0.0.1:8080 --requests reqs.jsonl --concurrency 500 [--keep-alive]
//! ```
//!
//! Each line of the requests file is `{"method":"GET","path":"/x","headers":[["k","v"]],"body":"…"}`
//! (`headers` and `body` optional). Without `--keep-alive` every request opens a new TCP
//! connection, as the seed's runner does. Prints one JSON object: completed seconds, requests/s,
//! status counts, transport errors and latency percentiles.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use tokio::net::TcpStream;

#[derive(Deserialize)]
struct Line {
    method: String,
    path: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

struct Outcome {
    statuses: BTreeMap<u16, usize>,
    errors: BTreeMap<String, usize>,
    latencies: Vec<Duration>,
    /// Response body bytes received.
    bytes: u64,
}

fn usage() -> ! {
    eprintln!("usage: loadgen --addr HOST:PORT --requests FILE --concurrency N [--keep-alive]");
    std::process::exit(2)
}

fn main() {
    let mut addr = None;
    let mut file = None;
    let mut concurrency = 1usize;
    let mut keep_alive = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next(),
            "--requests" => file = args.next(),
            "--concurrency" => {
                concurrency = args.next().and_then(|c| c.parse().ok()).unwrap_or_else(|| usage())
            }
            "--keep-alive" => keep_alive = true,
            _ => usage(),
        }
    }
    let (Some(addr), Some(file)) = (addr, file) else { usage() };
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let requests: Vec<Line> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{file}: {e}: {l}")))
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let (outcome, elapsed) = runtime.block_on(run(addr, Arc::new(requests), concurrency.max(1), keep_alive));
    let mut lat = outcome.latencies;
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let n = lat.len();
    let report = serde_json::json!({
        "requests": n,
        "concurrency": concurrency,
        "keep_alive": keep_alive,
        "completed_s": elapsed.as_secs_f64(),
        "rps": n as f64 / elapsed.as_secs_f64(),
        "statuses": outcome.statuses,
        "errors": outcome.errors,
        "mib_per_sec": outcome.bytes as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64(),
        "p50_ms": pct(0.50),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "max_ms": pct(1.0),
    });
    println!("{report}");
}

async fn run(
    addr: String,
    requests: Arc<Vec<Line>>,
    concurrency: usize,
    keep_alive: bool,
) -> (Outcome, Duration) {
    let next = Arc::new(AtomicUsize::new(0));
    let outcome = Arc::new(Mutex::new(Outcome {
        statuses: BTreeMap::new(),
        errors: BTreeMap::new(),
        latencies: Vec::new(),
        bytes: 0,
    }));
    let start = Instant::now();
    let workers: Vec<_> = (0..concurrency.min(requests.len()))
        .map(|_| {
            let (addr, requests, next, outcome) =
                (addr.clone(), requests.clone(), next.clone(), outcome.clone());
            tokio::spawn(async move {
                let mut conn: Option<Sender> = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(line) = requests.get(i) else { break };
                    let t = Instant::now();
                    let result = send(&addr, line, &mut conn, keep_alive).await;
                    let elapsed = t.elapsed();
                    let mut o = outcome.lock().expect("outcome");
                    o.latencies.push(elapsed);
                    match result {
                        Ok((status, bytes)) => {
                            *o.statuses.entry(status).or_default() += 1;
                            o.bytes += bytes as u64;
                        }
                        Err(e) => *o.errors.entry(e).or_default() += 1,
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker");
    }
    let elapsed = start.elapsed();
    let outcome = Arc::try_unwrap(outcome).ok().expect("workers done").into_inner().expect("outcome");
    (outcome, elapsed)
}

async fn connect(addr: &str) -> Result<Sender, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {}", e.kind()))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(connection);
    Ok(sender)
}

/// One request on a connection of its own, closed after the answer: written and read as bytes
/// (`Connection: close`, the answer ends with the connection). hyper's client machinery per
/// connection cost more CPU than the request did, on the same two cores as the server.
async fn send_once(addr: &str, line: &Line) -> Result<(u16, usize), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {}", e.kind()))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut req = format!("{} {} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n", line.method, line.path);
    for (k, v) in &line.headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !line.body.is_empty() || !matches!(line.method.as_str(), "GET" | "HEAD" | "DELETE") {
        req.push_str(&format!("content-length: {}\r\n", line.body.len()));
    }
    req.push_str("\r\n");
    req.push_str(&line.body);
    stream.write_all(req.as_bytes()).await.map_err(|e| format!("write: {}", e.kind()))?;
    let mut answer = Vec::with_capacity(4096);
    stream.read_to_end(&mut answer).await.map_err(|e| format!("read: {}", e.kind()))?;
    // "HTTP/1.1 200 OK": the status is the second word.
    let status = std::str::from_utf8(answer.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "no HTTP status line".to_owned())?;
    let body = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(0, |at| answer.len() - at - 4);
    Ok((status, body))
}

async fn send(
    addr: &str,
    line: &Line,
    conn: &mut Option<Sender>,
    keep_alive: bool,
) -> Result<(u16, usize), String> {
    if !keep_alive {
        return send_once(addr, line).await;
    }
    let mut sender = match conn.take() {
        Some(s) if keep_alive && !s.is_closed() => s,
        _ => connect(addr).await?,
    };
    let mut req =
        http::Request::builder().method(line.method.as_str()).uri(line.path.as_str()).header("host", addr);
    if !keep_alive {
        req = req.header("connection", "close");
    }
    for (k, v) in &line.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req.body(Full::new(Bytes::from(line.body.clone()))).map_err(|e| e.to_string())?;
    sender.ready().await.map_err(|e| format!("ready: {e}"))?;
    let resp = sender.send_request(req).await.map_err(|e| format!("send: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
    if keep_alive {
        *conn = Some(sender);
    }
    Ok((status, body.len()))
}
