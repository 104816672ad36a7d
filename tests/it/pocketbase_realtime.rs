//! PocketBase's `/api/realtime` as the access rules decide it: each subscriber is sent only the
//! records a read by it would return — a note to its owner, nothing to a visitor, not even the
//! id of another's deleted note — on an SQLite
//! file with no realtime configured (PocketBase's API starts the engine itself). The SDK's own
//! run against PocketBase's answers is in `pocketbase.rs`.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::sqlite::serve_sqlite;
use crate::support::{send_to, JWT_SECRET};

const SCHEMA: &str =
    "CREATE TABLE notes (id TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL, body TEXT NOT NULL);";

const RULES: &str = r#"
[notes]
select = { authenticated = "owner=eq.@jwt.sub" }
"#;

fn urlencoding(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A token of `role` for `sub`, signed as the server verifies them.
pub fn token(role: &str, sub: &str) -> String {
    let claims = json!({"role": role, "sub": sub, "exp": 4_000_000_000u64});
    let key = jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key).expect("a token")
}

/// An open stream: its client id, and each event (name, data) as it comes.
pub struct Stream {
    client: String,
    events: mpsc::Receiver<(String, Value)>,
}

/// Opens a stream on the server at `base`.
pub fn open(base: &str) -> Stream {
    let response = reqwest::blocking::Client::builder()
        .timeout(None)
        .build()
        .expect("client")
        .get(format!("{base}/api/realtime"))
        .send()
        .expect("the stream opens");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let (tx, events) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut name, mut lines) = (String::new(), BufReader::new(response).lines());
        while let Some(Ok(line)) = lines.next() {
            if let Some(n) = line.strip_prefix("event:") {
                name = n.to_owned();
            } else if let Some(data) = line.strip_prefix("data:") {
                let data: Value = serde_json::from_str(data).expect("an event's data is JSON");
                if tx.send((name.clone(), data)).is_err() {
                    return;
                }
            }
        }
    });
    let (name, hello) = events.recv_timeout(Duration::from_secs(10)).expect("PB_CONNECT");
    assert_eq!(name, "PB_CONNECT");
    Stream { client: hello["clientId"].as_str().expect("a client id").to_owned(), events }
}

impl Stream {
    /// Sets its subscriptions, as the caller `token` is (sent as PocketBase's SDK sends it).
    pub fn subscribe(&self, base: &str, token: Option<&str>, topics: &[&str]) -> (u16, String) {
        let body = json!({"clientId": self.client, "subscriptions": topics}).to_string();
        let mut headers = vec![("content-type", "application/json")];
        if let Some(t) = token {
            headers.push(("authorization", t));
        }
        let r = send_to(base, "POST", "/api/realtime", &headers, Some(&body));
        (r.status, r.body)
    }

    /// The next event within `wait`: its name and data.
    pub fn next(&self, wait: Duration) -> Option<(String, Value)> {
        self.events.recv_timeout(wait).ok()
    }

    /// The events that come within `wait` of each other: (topic, action, record id).
    fn received(&self, wait: Duration) -> Vec<(String, String, String)> {
        let mut got = Vec::new();
        while let Ok((name, data)) = self.events.recv_timeout(wait) {
            let id = data["record"]["id"].as_str().unwrap_or_default().to_owned();
            got.push((name, data["action"].as_str().unwrap_or_default().to_owned(), id));
        }
        got
    }
}

#[test]
fn each_subscriber_is_sent_the_records_it_may_read() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("notes.db");
    let base = serve_sqlite(&path, SCHEMA, RULES, Default::default());
    let (ann, bob) = (token("authenticated", "ann"), token("authenticated", "bob"));
    let streams = [open(&base), open(&base), open(&base)];
    assert_eq!(streams[0].subscribe(&base, Some(&ann), &["notes/*"]), (204, String::new()));
    assert_eq!(streams[1].subscribe(&base, Some(&bob), &["notes/*", "notes/n1"]), (204, String::new()));
    assert_eq!(streams[2].subscribe(&base, None, &["notes"]), (204, String::new()));
    // Whom a stream acts for is its first subscription's caller's, for good.
    let (status, body) = streams[0].subscribe(&base, Some(&bob), &["notes/*"]);
    assert_eq!(
        (status, serde_json::from_str::<Value>(&body).unwrap()),
        (
            403,
            json!({"data": {}, "message": "The current and the previous request authorization don't match.", "status": 403})
        )
    );
    // A filter the engine cannot apply is refused, not ignored, and changes nothing.
    let options =
        |query: Value| format!("notes/*?options={}", urlencoding(&json!({ "query": query }).to_string()));
    let (status, body) = streams[2].subscribe(&base, None, &["notes/*\nevent:forged"]);
    assert_eq!(status, 400, "a topic of two lines: {body}");
    for query in [
        json!({"filter": "body ~ 'x'"}),
        json!({"filter": "owner = 'a' || body = 'b'"}),
        json!({"expand": "owner"}),
    ] {
        let (status, body) = streams[2].subscribe(&base, None, &[&options(query)]);
        assert_eq!(status, 400, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["data"]["subscriptions"]["0"]["code"], "validation_invalid_value", "{body}");
    }
    let service = format!("Bearer {}", token("service_role", "admin"));
    let write = |method: &str, path: &str, body: Option<Value>| {
        let headers = [("authorization", service.as_str()), ("content-type", "application/json")];
        let r = send_to(&base, method, path, &headers, body.map(|b| b.to_string()).as_deref());
        assert!(r.status < 300, "{method} {path}: {} {}", r.status, r.body);
    };
    write(
        "POST",
        "/api/collections/notes/records",
        Some(json!({"id": "n1", "owner": "ann", "body": "ann's"})),
    );
    write(
        "POST",
        "/api/collections/notes/records",
        Some(json!({"id": "n2", "owner": "bob", "body": "bob's"})),
    );
    write("PATCH", "/api/collections/notes/records/n1", Some(json!({"body": "ann's, again"})));
    write("DELETE", "/api/collections/notes/records/n2", None);
    let wait = Duration::from_secs(3);
    let event = |topic: &str, action: &str, id: &str| (topic.to_owned(), action.to_owned(), id.to_owned());
    assert_eq!(
        streams[0].received(wait),
        [event("notes/*", "create", "n1"), event("notes/*", "update", "n1")]
    );
    // Bob's own — its delete too, the rule evaluated on the deleted row — and none of the record
    // of Ann's he asked for.
    assert_eq!(
        streams[1].received(Duration::from_millis(500)),
        [event("notes/*", "create", "n2"), event("notes/*", "delete", "n2")]
    );
    assert_eq!(streams[2].received(Duration::from_millis(500)), []);
}
