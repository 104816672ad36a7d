//! Read replicas (`db-uri-read-replicas`) with real streaming replicas that `pg_basebackup`
//! makes of a primary: reads go to a replica that is up, in time, and has replayed the
//! client's last write; writes, volatile calls and everything else to the primary.

use std::time::{Duration, Instant};

use rowgate::cluster::TempCluster;
use rowgate::config::ServeArgs;
use serde_json::json;

use crate::support::replica::{caught_up, primary, replica};
use crate::support::{request_to, send_to, sql_at, start_server};

/// A rowgate on the primary with `replica` as its read replica.
fn serve(replica: &TempCluster, max_lag_ms: u64) -> String {
    start_server(serve_args(replica, max_lag_ms))
}

fn serve_args(replica: &TempCluster, max_lag_ms: u64) -> ServeArgs {
    ServeArgs {
        db_uri: Some(primary().uri("postgres", "postgres")),
        db_uri_read_replicas: Some(replica.uri("postgres", "postgres")),
        db_replica_max_lag: Some(max_lag_ms),
        db_schemas: Some("api".into()),
        db_anon_role: Some("web_anon".into()),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        db_pool: Some(4),
        ..ServeArgs::default()
    }
}

/// Where `GET /rpc/in_recovery` ran: true on the replica.
fn read_on_replica(base: &str) -> bool {
    read_on_replica_with(base, &[])
}

/// Where `GET /rpc/in_recovery` with `headers` ran.
fn read_on_replica_with(base: &str, headers: &[(&str, &str)]) -> bool {
    let r = request_to(base, "GET", "/rpc/in_recovery", headers);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json() == json!(true)
}

/// Asks until `want` holds (the replicas' health is read every 100 ms).
fn eventually(what: &str, mut want: impl FnMut() -> bool) {
    let started = Instant::now();
    while !want() {
        assert!(started.elapsed() < Duration::from_secs(20), "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads answered so far by the primary and by the replica (`rowgate_reads_total`).
fn reads(base: &str) -> (u64, u64) {
    let metrics = request_to(base, "GET", "/rowgate/metrics", &[]).body;
    let mut counts = (0, 0);
    for line in metrics.lines().filter(|l| l.starts_with("rowgate_reads_total{")) {
        let n: u64 = line.rsplit(' ').next().and_then(|n| n.parse().ok()).expect("a count");
        match line.contains(r#"server="primary""#) {
            true => counts.0 += n,
            false => counts.1 += n,
        }
    }
    counts
}

/// The `rowgate_lsn` cookie a write's response sets, as a `Cookie` header's value.
fn cookie(r: &crate::support::Resp) -> String {
    let set = r.header("set-cookie").unwrap_or_else(|| panic!("no Set-Cookie on {} {}", r.status, r.body));
    set.split(';').next().unwrap().to_owned()
}

#[test]
fn reads_go_to_the_replica_and_writes_and_volatile_calls_to_the_primary() {
    let replica = replica(&[]);
    let base = serve(&replica, 5000);
    eventually("a GET is read on the replica", || read_on_replica(&base));
    let post = send_to(&base, "POST", "/rpc/in_recovery", &[], Some("{}"));
    assert_eq!((post.status, post.json()), (200, json!(false)), "POST /rpc runs on the primary");
    // A read that fails wherever it runs is the client's answer, and leaves the replica in use.
    for _ in 0..5 {
        let refused = request_to(&base, "GET", "/rpc/bump", &[]);
        assert_eq!(
            (refused.status, refused.json()["code"].clone()),
            (405, json!("25006")),
            "{}",
            refused.body
        );
    }
    assert!(read_on_replica(&base), "a client's failing read took the replica out of use");
    // An unlogged table, which a standby cannot read, is read on the primary.
    let unlogged = request_to(&base, "GET", "/scratch", &[]);
    assert_eq!((unlogged.status, unlogged.json()), (200, json!([{"id": 1}])), "{}", unlogged.body);
    assert!(read_on_replica(&base), "the replica was taken out of use by an unlogged table");
    let volatile = request_to(&base, "GET", "/rpc/in_recovery_volatile", &[]);
    assert_eq!(
        (volatile.status, volatile.json()),
        (200, json!(false)),
        "a volatile function runs on the primary"
    );
    let created = send_to(&base, "POST", "/notes", &[], Some(r#"{"id": 1, "body": "hello"}"#));
    assert_eq!(created.status, 201, "{}", created.body);
    let set = created.header("set-cookie").expect("the write's position in a cookie");
    assert!(set.starts_with("rowgate_lsn=") && set.contains("HttpOnly"), "{set}");
    let position = created.header("x-rowgate-lsn").expect("and in a header");
    assert!(set.starts_with(&format!("rowgate_lsn={position};")), "{set} {position}");
}

#[test]
fn a_client_reads_its_own_writes_under_concurrent_writes() {
    // The replica applies each commit 300 ms after the primary: a read sent to it at once
    // would miss the write it follows.
    let replica = replica(&["recovery_min_apply_delay=300ms"]);
    let base = serve(&replica, 5000);
    eventually("a GET is read on the replica", || read_on_replica(&base));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let base = base.clone();
            std::thread::spawn(move || {
                let (mut stale_without, mut stale_with, mut last) = (0, 0, String::new());
                for i in 0..25 {
                    let id = 1000 + t * 100 + i;
                    let body = format!(r#"{{"id": {id}, "body": "note {id}"}}"#);
                    let created =
                        send_to(&base, "POST", "/notes", &[("Prefer", "return=minimal")], Some(&body));
                    assert_eq!(created.status, 201, "{}", created.body);
                    let path = format!("/notes?id=eq.{id}");
                    // Without its cookie, a client is any reader: the replica may not have it yet.
                    if request_to(&base, "GET", &path, &[]).json() == json!([]) {
                        stale_without += 1;
                    }
                    let cookie = cookie(&created);
                    let read = request_to(&base, "GET", &path, &[("Cookie", &cookie)]);
                    if read.json() != json!([{"id": id, "body": format!("note {id}")}]) {
                        stale_with += 1;
                    }
                    last = cookie;
                }
                (stale_without, stale_with, last)
            })
        })
        .collect();
    let (mut without, mut with, mut last) = (0, 0, String::new());
    for t in threads {
        let (a, b, cookie) = t.join().expect("a writer");
        without += a;
        with += b;
        last = cookie;
    }
    println!("of 100 reads right after their write: {without} stale without the cookie, {with} with it");
    assert_eq!(with, 0, "reads of one's own writes that missed them (without the cookie: {without} of 100)");
    assert!(without > 50, "the replica was never behind ({without} of 100 stale reads without the cookie)");
    // Once the replica has replayed them, the same client reads there again.
    caught_up(&replica);
    eventually("the replica serves the client again", || read_on_replica_with(&base, &[("Cookie", &last)]));
}

#[test]
fn a_replica_that_lags_or_stops_is_skipped_and_used_again() {
    let replica = replica(&[]);
    let standby = replica.uri("postgres", "postgres");
    let base = serve(&replica, 1000);
    eventually("a GET is read on the replica", || read_on_replica(&base));
    // Replay paused while the primary writes: past 1 s of lag the replica is left alone.
    sql_at(&standby, "SELECT pg_wal_replay_pause()");
    let writer = std::thread::spawn(|| {
        for i in 0..30 {
            sql_at(
                &primary().uri("postgres", "postgres"),
                &format!("INSERT INTO api.notes VALUES ({}, 'lag')", 5000 + i),
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    eventually("reads leave a replica beyond db-replica-max-lag", || !read_on_replica(&base));
    writer.join().expect("the writer");
    sql_at(&standby, "SELECT pg_wal_replay_resume()");
    eventually("reads return to the replica once it catches up", || read_on_replica(&base));
    // Stopped: every read is still answered, by the primary.
    replica.stop().expect("stop the replica");
    for _ in 0..20 {
        assert!(!read_on_replica(&base));
    }
    replica.restart().expect("start the replica again");
    eventually("reads return to the restarted replica", || read_on_replica(&base));
}

#[test]
fn a_table_created_on_the_primary_is_read_there_until_the_replica_has_replayed_it() {
    let replica = replica(&[]);
    let standby = replica.uri("postgres", "postgres");
    let base = serve(&replica, 10_000);
    eventually("a GET is read on the replica", || read_on_replica(&base));
    sql_at(&standby, "SELECT pg_wal_replay_pause()");
    sql_at(
        &primary().uri("postgres", "postgres"),
        "CREATE TABLE api.fresh (id integer PRIMARY KEY); INSERT INTO api.fresh VALUES (1);
         GRANT SELECT ON api.fresh TO web_anon; NOTIFY rowgate, 'reload schema';",
    );
    // Until the reload, the table is unknown (PGRST205); after it, the primary answers: the
    // paused replica, still within db-replica-max-lag, has no such table yet.
    let mut answers = Vec::new();
    eventually("the new table is read", || {
        let r = request_to(&base, "GET", "/fresh", &[]);
        answers.push(r.status);
        match r.status {
            404 if r.json()["code"] == "PGRST205" => false,
            200 => {
                assert_eq!(r.json(), json!([{"id": 1}]));
                true
            }
            _ => panic!("the new table answered {} {} (after {answers:?})", r.status, r.body),
        }
    });
    assert!(!read_on_replica(&base), "a replica behind the schema cache was used");
    sql_at(&standby, "SELECT pg_wal_replay_resume()");
    eventually("the replica is used again once it has the table", || read_on_replica(&base));
    assert_eq!(request_to(&base, "GET", "/fresh", &[]).json(), json!([{"id": 1}]));
}

/// GETs `path` until the response cache's answer is not a bypass (while its feed is late on a
/// loaded machine, the cache steps aside): the answer, its `X-Cache`, and whether it was read
/// on the replica.
fn cached_read(base: &str, path: &str) -> (serde_json::Value, String, bool) {
    let started = Instant::now();
    loop {
        let before = reads(base);
        let r = request_to(base, "GET", path, &[]);
        assert_eq!(r.status, 200, "{}", r.body);
        let after = reads(base);
        match r.header("x-cache") {
            Some("bypass") => {
                assert!(started.elapsed() < Duration::from_secs(20), "the cache never answered")
            }
            Some(x) => return (r.json(), x.to_owned(), after.1 > before.1),
            None => panic!("no X-Cache on {path}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads row 7000 under new cache keys (`limit=` one more each time) until a miss is read on
/// the replica, each answering `want`; the last key's path.
fn miss_on_replica(base: &str, what: &str, limit: &mut u32, want: &serde_json::Value) -> String {
    let mut path = String::new();
    eventually(what, || {
        *limit += 1;
        path = format!("/notes?id=eq.7000&limit={limit}");
        let (body, x_cache, on_replica) = cached_read(base, &path);
        assert_eq!((&body, x_cache.as_str()), (want, "miss"));
        on_replica
    });
    path
}

/// With the response cache on, a miss (an answer about to be stored as current) is read on a
/// replica only once it has replayed every change the cache has applied: a write the replica
/// lacks sends the miss to the primary, whatever the replica's lag.
#[test]
fn cache_misses_are_read_on_a_replica_that_has_every_change_the_cache_has_applied() {
    let replica = replica(&[]);
    let standby = replica.uri("postgres", "postgres");
    // Only notes are cached: GET /rpc/in_recovery still tells where a read that is not stored ran.
    let base = start_server(ServeArgs {
        cache_enabled: Some(true),
        cache_routes: Some("notes".into()),
        ..serve_args(&replica, 10_000)
    });
    eventually("a GET is read on the replica", || read_on_replica(&base));
    // Before any write of its own, the cache's position is where its feed started.
    let mut limit = 0;
    miss_on_replica(&base, "a cache miss before any write is read on the replica", &mut limit, &json!([]));
    let created = send_to(
        &base,
        "POST",
        "/notes",
        &[("Prefer", "return=minimal")],
        Some(r#"{"id": 7000, "body": "one"}"#),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let one = json!([{"id": 7000, "body": "one"}]);
    // Misses of new keys (limit=1, 2, ...) until the replica's replayed position is known.
    let path = miss_on_replica(&base, "a cache miss is read on the replica", &mut limit, &one);
    let (body, x_cache, _) = cached_read(&base, &path);
    assert_eq!((body, x_cache.as_str()), (one, "hit"));
    // The replica stops replaying; the cache applies a write at once.
    sql_at(&standby, "SELECT pg_wal_replay_pause()");
    let patched = send_to(&base, "PATCH", "/notes?id=eq.7000", &[], Some(r#"{"body": "two"}"#));
    assert_eq!(patched.status, 204, "{}", patched.body);
    let two = json!([{"id": 7000, "body": "two"}]);
    assert_eq!(
        cached_read(&base, &path),
        (two.clone(), "miss".into(), false),
        "the miss is read on the primary"
    );
    assert_eq!(cached_read(&base, &path), (two.clone(), "hit".into(), false));
    limit += 1;
    let new_key = format!("/notes?id=eq.7000&limit={limit}");
    assert_eq!(cached_read(&base, &new_key), (two.clone(), "miss".into(), false));
    // Still within db-replica-max-lag: reads that are not stored still go there.
    assert!(read_on_replica(&base), "the paused replica was taken out of use");
    sql_at(&standby, "SELECT pg_wal_replay_resume()");
    let returned = "cache misses return to the replica once it has replayed the write";
    miss_on_replica(&base, returned, &mut limit, &two);
}

/// Every connection to the replica busy: a read waits a moment for one, then the primary
/// answers it, and the replica stays in use.
#[test]
fn a_busy_replica_hands_reads_to_the_primary_after_a_short_wait() {
    let replica = replica(&[]);
    let base = serve(&replica, 5000);
    eventually("a GET is read on the replica", || read_on_replica(&base));
    // Four reads of 4 s hold the replica's four connections (db-pool 4).
    let slow: Vec<_> = (0..4)
        .map(|_| {
            let base = base.clone();
            std::thread::spawn(move || request_to(&base, "GET", "/rpc/slow", &[]))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    assert!(!read_on_replica(&base), "a read found a replica connection");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(2), "the read waited {waited:?}, not the replicas' short wait");
    for read in slow {
        let r = read.join().expect("a slow read");
        assert_eq!((r.status, r.json()), (200, json!(true)), "{}", r.body);
    }
    assert!(read_on_replica(&base), "the busy replica was taken out of use");
}
