//! A webhook receiver: a real HTTP server on a loopback port that records every request it is
//! sent and answers as the test tells it (a status, a body, a delay).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// The path and query.
    pub target: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The status it was answered with.
    pub answered: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// How to answer a request: status, body, and how long to wait first.
pub type Answer = Box<Answering>;

/// What an [`Answer`] is.
pub type Answering = dyn Fn(&Received) -> (u16, Vec<u8>, Duration) + Send + Sync;

/// A running receiver.
pub struct Receiver {
    pub port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// Listens on `port` (0: any) and answers each request with `answer`.
    pub fn start(port: u16, answer: Answer) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the receiver");
        let port = listener.local_addr().expect("addr").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let (log, answer) = (received.clone(), Arc::new(answer));
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let (log, answer) = (log.clone(), answer.clone());
                std::thread::spawn(move || serve(stream, &log, &*answer));
            }
        });
        Receiver { port, received }
    }

    /// Answers 200 with `{}` to everything.
    pub fn ok() -> Receiver {
        Receiver::start(0, Box::new(|_| (200, b"{}".to_vec(), Duration::ZERO)))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Waits up to `within` for `done` to hold of what was received; what was received.
    pub fn wait_for(&self, within: Duration, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let now = self.received();
            if done(&now) {
                return now;
            }
            let seen: Vec<_> = now
                .iter()
                .map(|r| (r.method.as_str(), r.target.as_str(), String::from_utf8_lossy(&r.body)))
                .collect();
            assert!(
                Instant::now() < deadline,
                "the receiver did not get what was expected; it got {seen:#?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Received>>, answer: &Answering) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let length =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let mut received = Received { method, target, headers, body, answered: 0 };
    let (status, reply, delay) = answer(&received);
    std::thread::sleep(delay);
    received.answered = status;
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        reply.len()
    );
    // Recorded once answered, as the sender saw it (a reply cut off by a kill is not one).
    if stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&reply))
        .and_then(|()| stream.flush())
        .is_ok()
    {
        log.lock().unwrap().push(received);
    }
}
