//! Requests rowgate sends on the database's behalf — pg_net's `net.http_*` and Supabase's
//! database webhooks (docs/webhooks.md): one client for them all, which connects only where
//! the [`AddressGuard`] permits, follows no redirect, bounds each request's time and the
//! response it keeps, and says whether a failure is worth another try.

pub mod guard;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use guard::AddressGuard;

use crate::config::NetSettings;

/// The longest a request may take, whatever it asks for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(300);

/// One request to send.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, `DELETE`, ...
    pub method: String,
    /// An `http` or `https` URL.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
    /// How long it may take, connection to the response's last byte.
    pub timeout: Duration,
}

/// What became of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The server answered.
    Answered(Answer),
    /// It did not: the reason, and whether it ran out of time.
    Failed {
        /// What went wrong, for `net._http_response.error_msg` and the log.
        message: String,
        /// The request's time was up.
        timed_out: bool,
        /// Whether trying again may succeed (a refused address, a bad URL or a response past
        /// the size limit will not).
        retry: bool,
    },
}

/// A server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Its status code.
    pub status: u16,
    /// Its headers, a JSON object (repeated names joined with `, `).
    pub headers: serde_json::Map<String, serde_json::Value>,
    /// Its `Content-Type`, if any.
    pub content_type: Option<String>,
    /// Its body, as text (bytes that are not UTF-8 replaced).
    pub body: String,
}

/// What a sender records of a request's last try: the columns of pg_net's `_http_response`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub status: Option<u16>,
    pub content_type: Option<String>,
    /// The answer's headers, a JSON object's text.
    pub headers: Option<String>,
    pub content: Option<String>,
    pub timed_out: bool,
    pub error: Option<String>,
}

impl Sent {
    /// Whether to try again: no answer in time or at all, or an answer that says "later"
    /// (a 5xx, 429 Too Many Requests, 408 Request Timeout).
    pub fn retryable(&self) -> bool {
        match self {
            Sent::Answered(a) => a.status >= 500 || a.status == 429 || a.status == 408,
            Sent::Failed { retry, .. } => *retry,
        }
    }

    /// After try number `tries` of a request that may be tried `retries` times more than once:
    /// how long to wait before the next, if there is to be one.
    pub fn retry_after(&self, tries: u32, retries: u32) -> Option<Duration> {
        (self.retryable() && tries <= retries).then(|| backoff(tries))
    }

    /// Whether it was answered below 400.
    pub fn succeeded(&self) -> bool {
        matches!(self, Sent::Answered(a) if a.status < 400)
    }

    /// What the log (and a cron job's record) says of it.
    pub fn said(&self) -> String {
        match self {
            Sent::Answered(a) => format!("status {}", a.status),
            Sent::Failed { message, .. } => message.clone(),
        }
    }

    /// What is recorded of it.
    pub fn recorded(&self) -> Recorded {
        match self {
            Sent::Answered(a) => Recorded {
                status: Some(a.status),
                content_type: a.content_type.clone(),
                headers: Some(serde_json::Value::Object(a.headers.clone()).to_string()),
                content: Some(a.body.clone()),
                timed_out: false,
                error: None,
            },
            Sent::Failed { message, timed_out, .. } => Recorded {
                status: None,
                content_type: None,
                headers: None,
                content: None,
                timed_out: *timed_out,
                error: Some(message.clone()),
            },
        }
    }
}

/// How long to wait before try `attempt` + 1 (the first retry after a second, doubling, at
/// most ten minutes).
fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.saturating_sub(1).min(20)).min(Duration::from_secs(600))
}

/// The client every outbound request goes through.
#[derive(Clone)]
pub struct Outbound {
    client: reqwest::Client,
    guard: Arc<AddressGuard>,
    max_response_bytes: usize,
}

impl Outbound {
    /// A client for `settings`.
    pub fn new(settings: &NetSettings) -> Result<Outbound, String> {
        let guard = Arc::new(AddressGuard::new(&settings.allow, &settings.deny));
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(guard::GuardedResolver(guard.clone())))
            // A proxy from the environment would make the connection, not the guard.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("rowgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("the outbound HTTP client cannot be made: {e}"))?;
        Ok(Outbound { client, guard, max_response_bytes: settings.max_response_bytes })
    }

    /// Sends `request`; never fails, the failure is what it returns.
    pub async fn send(&self, request: &Request) -> Sent {
        let sent = self.try_send(request).await;
        let counter = match &sent {
            Sent::Answered(a) if a.status < 400 => &SUCCEEDED,
            Sent::Failed { timed_out: true, .. } => &TIMED_OUT,
            _ => &FAILED,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        sent
    }

    async fn try_send(&self, request: &Request) -> Sent {
        let refuse = |message: String| Sent::Failed { message, timed_out: false, retry: false };
        let url = match reqwest::Url::parse(&request.url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
            Ok(_) => {
                return refuse(format!("{}: only http and https URLs with a host are sent", request.url))
            }
            Err(e) => return refuse(format!("{}: not a URL: {e}", request.url)),
        };
        // An address written in the URL is never resolved, so never seen by the resolver.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal.filter(|ip| !self.guard.permits(*ip)) {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return refuse(format!("{ip} is an address outbound requests may not reach (net-allow)"));
        }
        let Ok(method) = reqwest::Method::from_bytes(request.method.to_ascii_uppercase().as_bytes()) else {
            return refuse(format!("{:?} is not an HTTP method", request.method));
        };
        let mut builder = self.client.request(method, url).timeout(request.timeout.min(MAX_TIMEOUT));
        for (name, value) in &request.headers {
            let (Ok(name), Ok(value)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                reqwest::header::HeaderValue::from_str(value),
            ) else {
                return refuse(format!("{name:?}: {value:?} is not an HTTP header"));
            };
            builder = builder.header(name, value);
        }
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        let mut response = match builder.send().await {
            Ok(r) => r,
            Err(e) => return failure(&e),
        };
        let mut headers = serde_json::Map::new();
        for (name, value) in response.headers() {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            match headers.get_mut(name.as_str()) {
                Some(serde_json::Value::String(joined)) => {
                    joined.push_str(", ");
                    joined.push_str(&value);
                }
                _ => {
                    headers.insert(name.as_str().to_owned(), value.into());
                }
            }
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let status = response.status().as_u16();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if body.len() + chunk.len() > self.max_response_bytes => {
                    return refuse(format!(
                        "the response (status {status}) is larger than {} bytes (net-max-response-bytes)",
                        self.max_response_bytes
                    ));
                }
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return failure(&e),
            }
        }
        Sent::Answered(Answer {
            status,
            headers,
            content_type,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

/// A request that got no whole answer: a refused address is final, anything else (no route,
/// refused connection, reset, time up) may pass.
fn failure(e: &reqwest::Error) -> Sent {
    if e.is_timeout() {
        return Sent::Failed { message: "the request timed out".into(), timed_out: true, retry: true };
    }
    let mut parts = vec![e.to_string()];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<guard::Refused>() {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return Sent::Failed { message: refused.to_string(), timed_out: false, retry: false };
        }
        parts.push(s.to_string());
        source = s.source();
    }
    Sent::Failed { message: parts.join(": "), timed_out: false, retry: true }
}

static SUCCEEDED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);
static TIMED_OUT: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// The outbound requests' counters in Prometheus text.
pub fn render_metrics(out: &mut String) {
    out.push_str(
        "# HELP rowgate_net_requests_total Outbound requests (webhooks, pg_net) by outcome: ok (below 400), \
         failed (an error status or no answer), timed_out, refused (an address net-allow does not permit; counted as failed too).\n\
         # TYPE rowgate_net_requests_total counter\n",
    );
    for (outcome, n) in
        [("ok", &SUCCEEDED), ("failed", &FAILED), ("timed_out", &TIMED_OUT), ("refused", &REFUSED)]
    {
        out.push_str(&format!(
            "rowgate_net_requests_total{{outcome=\"{outcome}\"}} {}\n",
            n.load(Ordering::Relaxed)
        ));
    }
}
