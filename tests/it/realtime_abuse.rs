//! Realtime as a stranger tries it: filters that cost the server in proportion to what they
//! are matched against, more bindings than any app needs, and what one subscriber's filters
//! may cost the others' deliveries.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::realtime::{connect, exp, next, next_matching, send, sqlite_server, token, Socket};
use crate::support::{block_on, send_to};

/// Joins `topic` with `bindings`; the `system` message that follows the reply.
async fn join(ws: &mut Socket, topic: &str, bindings: Value) -> Value {
    let join = json!({"topic": format!("realtime:{topic}"), "event": "phx_join", "ref": topic, "join_ref": topic,
        "payload": {"config": {"presence": {"enabled": false}, "postgres_changes": bindings}}});
    send(ws, join).await;
    let reply = next(ws).await;
    assert_eq!(reply["payload"]["status"], "ok", "{reply}");
    next_matching(ws, |m| m["event"] == "system").await["payload"].clone()
}

fn notes(filter: &str) -> Value {
    json!({"event": "INSERT", "schema": "public", "table": "notes", "filter": filter})
}

#[test]
fn a_subscriber_s_patterns_never_hold_up_another_s_deliveries() {
    let base = sqlite_server(|_| {});
    block_on(async {
        // A pattern long enough to take seconds against a long row is refused at the join.
        let mut stranger = connect(&base, "1.0.0").await;
        let huge = format!("body=like.%{}b", "a".repeat(20_000));
        let said = join(&mut stranger, "huge", json!([notes(&huge)])).await;
        assert_eq!(
            (&said["status"], &said["message"]),
            (&json!("error"), &json!("pattern longer than 512 bytes"))
        );
        // The costliest patterns that are accepted are matched apart from other subscribers.
        let costly = format!("body=like.%a{}b", "_".repeat(100));
        let bindings: Vec<Value> = (0..8).map(|_| notes(&costly)).collect();
        let said = join(&mut stranger, "costly", Value::Array(bindings)).await;
        assert_eq!(said["status"], "ok", "{said}");
        let mut reader = connect(&base, "1.0.0").await;
        assert_eq!(join(&mut reader, "plain", json!([notes("")])).await["status"], "ok");

        // Five rows of 200 KB, an `a` every 101 characters and `b` between: the costly
        // patterns test every position of each.
        let row = json!({"body": format!("a{}", "b".repeat(100)).repeat(2000)});
        let body = Value::Array(vec![row; 5]).to_string();
        let service = format!("Bearer {}", token(json!({"role": "service_role", "exp": exp()})));
        let written = tokio::task::spawn_blocking({
            let base = base.clone();
            move || {
                let r = send_to(
                    &base,
                    "POST",
                    "/notes",
                    &[("content-type", "application/json"), ("authorization", &service)],
                    Some(&body),
                );
                assert_eq!(r.status, 201, "{}", r.body);
                Instant::now()
            }
        })
        .await
        .unwrap();
        for _ in 0..5 {
            let change = next_matching(&mut reader, |m| m["event"] == "postgres_changes").await;
            assert_eq!(change["payload"]["data"]["type"], "INSERT");
        }
        let waited = written.elapsed();
        assert!(waited < Duration::from_millis(500), "the plain subscriber waited {waited:?}");
        // The costly subscriber is told, and closed.
        let told = next_matching(&mut stranger, |m| m["event"] == "system").await;
        assert_eq!(
            told["payload"]["message"],
            "This client's filters take too long to match: use fewer or simpler patterns"
        );
        let closed = loop {
            match tokio::time::timeout(Duration::from_secs(10), stranger.next()).await {
                Ok(Some(Ok(Message::Close(c)))) => break c,
                Ok(Some(Ok(_))) => continue,
                other => panic!("no close frame: {other:?}"),
            }
        };
        assert_eq!(closed.map(|c| u16::from(c.code)), Some(1008));
    });
}

#[test]
fn a_connection_s_bindings_and_patterns_are_bounded() {
    let base = sqlite_server(|_| {});
    block_on(async {
        let mut ws = connect(&base, "1.0.0").await;
        let hundred: Vec<Value> = (0..100).map(|i| notes(&format!("n=eq.{i}"))).collect();
        for i in 0..10 {
            let said = join(&mut ws, &format!("many{i}"), Value::Array(hundred.clone())).await;
            assert_eq!(said["status"], "ok", "{said}");
        }
        let said = join(&mut ws, "one-too-many", json!([notes("")])).await;
        assert_eq!(
            (&said["status"], &said["message"]),
            (&json!("error"), &json!("Too many postgres_changes bindings: at most 1000 per connection"))
        );

        let mut ws = connect(&base, "1.0.0").await;
        let patterns: Vec<Value> = (0..40).map(|i| notes(&format!("body=match.^x{i}[a-z]+y$"))).collect();
        let said = join(&mut ws, "patterns", Value::Array(patterns)).await;
        assert_eq!(
            (&said["status"], &said["message"]),
            (&json!("error"), &json!("Too many filter patterns: at most 2048 KiB of them per connection"))
        );
    });
}

#[test]
fn a_connection_s_presence_is_bounded() {
    let base = sqlite_server(|_| {});
    block_on(async {
        let mut ws = connect(&base, "1.0.0").await;
        for topic in ["room1", "room2"] {
            let join = json!({"topic": format!("realtime:{topic}"), "event": "phx_join", "ref": topic,
                "join_ref": topic, "payload": {"config": {"presence": {"key": "me"}}}});
            send(&mut ws, join).await;
            let reply = next_matching(&mut ws, |m| m["ref"] == topic).await;
            assert_eq!(reply["payload"]["status"], "ok", "{reply}");
        }
        let track = |topic: &str, size: usize, r: &str| {
            json!({"topic": format!("realtime:{topic}"), "event": "presence", "ref": r, "join_ref": topic,
                "payload": {"type": "presence", "event": "track", "payload": {"pad": "x".repeat(size)}}})
        };
        send(&mut ws, track("room1", 60_000, "t1")).await;
        let reply = next_matching(&mut ws, |m| m["ref"] == "t1").await;
        assert_eq!(reply["payload"]["status"], "ok", "{reply}");
        // Together past 64 KiB: refused, and what was tracked stays.
        send(&mut ws, track("room2", 10_000, "t2")).await;
        let reply = next_matching(&mut ws, |m| m["ref"] == "t2").await;
        assert_eq!(
            reply["payload"],
            json!({"status": "error", "response": {"reason": "Track message size exceeded"}})
        );
        // Tracking again on the same channel replaces its payload: within the budget.
        send(&mut ws, track("room1", 50_000, "t3")).await;
        assert_eq!(next_matching(&mut ws, |m| m["ref"] == "t3").await["payload"]["status"], "ok");
        send(&mut ws, track("room2", 10_000, "t4")).await;
        assert_eq!(next_matching(&mut ws, |m| m["ref"] == "t4").await["payload"]["status"], "ok");
    });
}
