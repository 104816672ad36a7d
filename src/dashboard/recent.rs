//! The requests the dashboard's Activity page shows: the latest ones, kept only while someone
//! watches (asked within the last minute), so that a server nobody watches pays one atomic read
//! per request for it.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Requests kept at most.
const KEPT: usize = 500;
/// How long a look at the page keeps the recording on.
const WATCHED_FOR: Duration = Duration::from_secs(60);

/// One request as the page lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Request {
    /// When it ended, in milliseconds since the Unix epoch.
    pub at: u64,
    /// Its method.
    pub method: String,
    /// Its path and query, as the access log shows them.
    pub uri: String,
    /// The answer's status.
    pub status: u16,
    /// How long it took, in microseconds.
    pub micros: u64,
    /// The client's address.
    pub client: String,
    /// Who it said it was (the dashboard, a token's role, an API key, a visitor).
    pub caller: String,
}

/// The latest requests, while watched.
#[derive(Default)]
pub struct RecentRequests {
    watched_until: AtomicU64,
    kept: Mutex<VecDeque<Request>>,
}

fn now_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl RecentRequests {
    /// Whether requests are being kept (someone looked within the last minute).
    pub fn watched(&self) -> bool {
        self.watched_until.load(Ordering::Relaxed) > now_millis()
    }

    /// Keeps a request that ended now.
    pub fn record(
        &self,
        method: &str,
        uri: String,
        status: u16,
        took: Duration,
        client: IpAddr,
        caller: String,
    ) {
        let request = Request {
            at: now_millis(),
            method: method.to_owned(),
            uri,
            status,
            micros: took.as_micros() as u64,
            client: client.to_string(),
            caller,
        };
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(request);
    }

    /// The requests kept, newest first; keeps recording for another minute.
    pub fn look(&self) -> Vec<Request> {
        self.watched_until.store(now_millis() + WATCHED_FOR.as_millis() as u64, Ordering::Relaxed);
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).iter().rev().cloned().collect()
    }
}
