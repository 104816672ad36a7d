//! A PostgreSQL failover (docs/reliability.md): the primary stopped at once and its synchronous
//! standby promoted, as an HA manager does, with rowgate's multi-host `db-uri`
//! (`target_session_attrs=read-write`) following it without a restart. The change feed's slot
//! died with the old primary: the response cache serves nothing it can no longer invalidate,
//! realtime subscribers are told changes may have been missed and then that the feed runs
//! again, and every acknowledged write is on the new primary.

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rowgate::cluster::TempCluster;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{block_on, send_to, start_server, stop_with_this_process, JWT_SECRET};

const SCHEMA: &str = r#"
CREATE ROLE anon NOLOGIN;
CREATE ROLE authenticator LOGIN PASSWORD 'secret' NOINHERIT;
CREATE ROLE replicator LOGIN PASSWORD 'secret';
GRANT anon TO authenticator;
CREATE TABLE public.notes (id int PRIMARY KEY, body text NOT NULL);
GRANT SELECT, INSERT, UPDATE ON public.notes TO anon;
"#;

fn install(cluster: &TempCluster, what: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(what)
        .args(["--db-uri", &cluster.uri("postgres", "postgres")])
        .output()
        .expect("run rowgate");
    assert!(out.status.success(), "{what:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Every message a subscriber to `notes` receives, in order.
fn subscribe(base: &str) -> mpsc::Receiver<Value> {
    let anon = crate::storage::token(json!({"role": "anon"}));
    let url = format!("{}/realtime/v1/websocket?apikey={anon}&vsn=1.0.0", base.replace("http://", "ws://"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        block_on(async move {
            let (mut ws, _) = tokio_tungstenite::connect_async(url).await.expect("websocket");
            let changes = json!([{"event": "*", "schema": "public", "table": "notes"}]);
            let join = json!({"topic": "realtime:notes", "event": "phx_join", "ref": "1", "join_ref": "1",
                "payload": {"config": {"postgres_changes": changes}, "access_token": anon}});
            ws.send(Message::text(join.to_string())).await.expect("join");
            let mut heartbeat = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    m = ws.next() => {
                        let Some(Ok(Message::Text(t))) = m else { return };
                        if tx.send(serde_json::from_str(t.as_str()).expect("JSON")).is_err() { return }
                    }
                    _ = heartbeat.tick() => {
                        let beat = json!({"topic": "phoenix", "event": "heartbeat", "payload": {}, "ref": "h"});
                        if ws.send(Message::text(beat.to_string())).await.is_err() { return }
                    }
                }
            }
        })
    });
    rx
}

/// Waits for a message `wanted` picks, passing over the others.
fn wait_for(rx: &mpsc::Receiver<Value>, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(m) if wanted(&m) => return m,
            Ok(_) => {}
            Err(_) => panic!("no {what} within a minute"),
        }
    }
}

fn is_change(id: i64) -> impl Fn(&Value) -> bool {
    move |m| m["event"] == "postgres_changes" && m["payload"]["data"]["record"]["id"] == id
}

fn feed_status(status: &'static str) -> impl Fn(&Value) -> bool {
    move |m| {
        m["event"] == "system"
            && m["payload"]["extension"] == "postgres_changes"
            && m["payload"]["status"] == status
    }
}

fn write(base: &str, method: &str, path: &str, body: &str) -> u16 {
    let headers = [("content-type", "application/json"), ("prefer", "return=minimal")];
    send_to(base, method, path, &headers, Some(body)).status
}

#[test]
fn the_cache_and_realtime_follow_a_failover_and_no_acknowledged_write_is_lost() {
    let dir = tempfile::tempdir().expect("dir").keep();
    let primary = TempCluster::start_in(&dir.join("a"), &[])
        .unwrap_or_else(|e| panic!("cannot start the primary: {e}"));
    stop_with_this_process(&primary);
    block_on(primary.run_sql("postgres", SCHEMA)).expect("schema");
    install(&primary, &["cache", "install"]);
    install(&primary, &["realtime", "install", "--replication-role", "replicator"]);
    block_on(primary.run_sql("postgres", "ALTER PUBLICATION supabase_realtime ADD TABLE public.notes"))
        .expect("publish");
    let standby = TempCluster::start_replica(&dir.join("b"), &primary, &[])
        .unwrap_or_else(|e| panic!("cannot start the standby: {e}"));
    stop_with_this_process(&standby);
    // Synchronous from now on (before, a commit would wait for a standby not yet there).
    for sql in ["ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"] {
        block_on(primary.run_sql("postgres", sql)).expect("synchronous");
    }

    let hosts = format!("127.0.0.1:{},127.0.0.1:{}", primary.port(), standby.port());
    let base = start_server(rowgate::config::ServeArgs {
        db_uri: Some(format!(
            "postgres://authenticator:secret@{hosts}/postgres?target_session_attrs=read-write"
        )),
        db_uri_replication: Some(format!("postgres://replicator:secret@{hosts}/postgres")),
        db_schemas: Some("public".into()),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        jwt_secret: Some(JWT_SECRET.into()),
        cache_enabled: Some(true),
        realtime_enabled: Some(true),
        ..Default::default()
    });
    let rx = subscribe(&base);
    wait_for(&rx, "the subscription", feed_status("ok"));
    assert_eq!(write(&base, "POST", "/notes", r#"{"id": 1, "body": "before"}"#), 201);
    wait_for(&rx, "the change before the failover", is_change(1));
    // Cached: the second read is a hit.
    for _ in 0..2 {
        send_to(&base, "GET", "/notes?id=eq.1", &[], None);
    }
    assert_eq!(send_to(&base, "GET", "/notes?id=eq.1", &[], None).header("x-cache"), Some("hit"));

    // Writes go on through the failover; each one acknowledged is kept.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (base, stop) = (base.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut acked, mut refused) = (Vec::new(), 0);
            let mut id: i64 = 100;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                match write(&base, "POST", "/notes", &json!({"id": id, "body": "during"}).to_string()) {
                    201 => acked.push(id),
                    503 | 504 => refused += 1,
                    other => panic!("a write during the failover answered {other}"),
                }
                id += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            (acked, refused)
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let failed_at = Instant::now();
    primary.stop().expect("stop the primary");
    standby.promote().expect("promote the standby");
    // Subscribers hear that changes may have been missed, then that the feed runs again.
    wait_for(&rx, "the feed's loss", feed_status("error"));
    wait_for(&rx, "the feed's return", feed_status("ok"));
    let outage = failed_at.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (acked, refused) = writer.join().expect("writer");

    // A change on the new primary made behind rowgate's back reaches the cache and subscribers.
    block_on(standby.run_sql("postgres", "UPDATE public.notes SET body = 'after' WHERE id = 1"))
        .expect("update");
    wait_for(&rx, "the change after the failover", is_change(1));
    let started = Instant::now();
    loop {
        let r = send_to(&base, "GET", "/notes?id=eq.1", &[], None);
        if r.json() == json!([{"id": 1, "body": "after"}]) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "a stale cached read: {}", r.body);
        std::thread::sleep(Duration::from_millis(100));
    }
    let kept = crate::support::replica::value(
        &standby.uri("postgres", "postgres"),
        &format!(
            "SELECT count(*) FROM public.notes WHERE id IN ({})",
            acked.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
        ),
    );
    assert_eq!(kept, acked.len().to_string(), "every acknowledged write is on the new primary");
    assert!(!acked.is_empty());
    eprintln!(
        "failover: feed back after {outage:?}; {} writes acknowledged, {refused} refused meanwhile",
        acked.len()
    );
}
