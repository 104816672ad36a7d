//! The response cache (`cache-enabled`), against real rowgate processes (the built binary) on a
//! PostgreSQL cluster of its own with `rowgate cache install` applied: hits and misses, what is
//! never cached, invalidation by writes through rowgate and through SQL, read-your-writes across
//! two instances, row-level security, a PostgreSQL restart, the memory bound, and a stale-read
//! stress run.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rowgate::cluster::TempCluster;
use serde_json::json;

use crate::support::{block_on, request_to, send_to, JWT_SECRET};

const SCHEMA: &str = r#"
CREATE ROLE web_anon NOLOGIN;
CREATE ROLE web_user NOLOGIN;
CREATE ROLE authenticator LOGIN PASSWORD 'secret' NOINHERIT REPLICATION;
GRANT web_anon, web_user TO authenticator;
CREATE SCHEMA api;
GRANT USAGE ON SCHEMA api TO web_anon, web_user;
CREATE TABLE api.items (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO api.items SELECT g, g FROM generate_series(1, 200) g;
CREATE TABLE api.counters (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO api.counters VALUES (1, 0);
CREATE TABLE api.stress (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO api.stress VALUES (150, 0), (151, 0);
GRANT SELECT, UPDATE ON api.counters, api.stress TO web_anon;
CREATE TABLE api.depts (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE api.emps (id int PRIMARY KEY, name text NOT NULL, dept int REFERENCES api.depts);
INSERT INTO api.depts VALUES (1, 'one'), (2, 'two');
INSERT INTO api.emps VALUES (10, 'ann', 1), (20, 'bob', 2);
GRANT SELECT ON api.depts, api.emps TO web_anon;
CREATE SCHEMA private;
CREATE TABLE private.labels (item int PRIMARY KEY, label text);
INSERT INTO private.labels VALUES (1, 'one');
CREATE VIEW api.labelled AS SELECT i.id, i.n, l.label FROM api.items i LEFT JOIN private.labels l ON l.item = i.id;
CREATE VIEW api.recent AS SELECT id, now() AS seen FROM api.items;
CREATE VIEW api.tenant_items AS SELECT id, n, current_setting('Request.Headers', true)::json ->> 'x-tenant' AS tenant
  FROM api.items;
GRANT SELECT ON api.tenant_items TO web_anon;
GRANT SELECT, INSERT, UPDATE, DELETE ON api.items TO web_anon, web_user;
GRANT SELECT ON api.labelled, api.recent TO web_anon;
CREATE TABLE api.notes (id serial PRIMARY KEY, owner text NOT NULL
  DEFAULT current_setting('request.jwt.claims', true)::json->>'sub', body text);
ALTER TABLE api.notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON api.notes USING (owner = current_setting('request.jwt.claims', true)::json->>'sub');
GRANT SELECT, INSERT ON api.notes TO web_user;
GRANT USAGE ON SEQUENCE api.notes_id_seq TO web_user;
INSERT INTO api.notes (owner, body) VALUES ('alice', 'alice secret'), ('bob', 'bob secret');
CREATE TABLE api.big (id int PRIMARY KEY, payload text);
INSERT INTO api.big SELECT g, repeat('x', 4000) FROM generate_series(1, 100) g;
GRANT SELECT ON api.big TO web_anon;
CREATE TABLE api.events (id int, part int, v text, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE api.events_1 PARTITION OF api.events FOR VALUES IN (1);
INSERT INTO api.events VALUES (1, 1, 'a');
GRANT SELECT ON api.events, api.events_1 TO web_anon;
CREATE UNLOGGED TABLE api.scratch (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO api.scratch VALUES (1, 1), (2, 2);
GRANT SELECT ON api.scratch TO web_anon;
CREATE FUNCTION api.total() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT sum(n) FROM api.items';
CREATE FUNCTION api.dice() RETURNS float8 LANGUAGE sql VOLATILE AS 'SELECT random()';
"#;

/// A cluster with the schema and `rowgate cache install` applied: changes read by logical
/// decoding, or (`triggers`) reported by the triggers.
struct Db {
    cluster: TempCluster,
}

impl Db {
    fn start() -> Db {
        Db::start_with(false)
    }

    fn start_with(triggers: bool) -> Db {
        let cluster = TempCluster::start()
            .unwrap_or_else(|e| panic!("cannot start PostgreSQL for the cache tests: {e}"));
        crate::support::stop_with_this_process(&cluster);
        block_on(cluster.run_sql("postgres", SCHEMA)).expect("cache test schema");
        let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
            .args(["cache", "install", "--db-uri", &cluster.uri("postgres", "postgres")])
            .args(triggers.then_some("--triggers"))
            .output()
            .expect("run rowgate cache install");
        assert!(out.status.success(), "cache install failed: {}", String::from_utf8_lossy(&out.stderr));
        let summary = String::from_utf8_lossy(&out.stdout);
        assert!(summary.contains("event triggers"), "{summary}");
        let feed = if triggers { "with triggers" } else { "logical decoding" };
        assert!(summary.contains(feed), "{summary}");
        Db { cluster }
    }

    fn sql(&self, statements: &str) {
        block_on(self.cluster.run_sql("postgres", statements)).expect("sql");
    }
}

fn db() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(Db::start)
}

/// The same, with the triggers instead of logical decoding.
fn db_with_triggers() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(|| Db::start_with(true))
}

/// A `rowgate serve` process, killed when dropped (and when the test binary exits).
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM: a graceful stop, which tells the other instances it is leaving.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(cluster: &TempCluster, extra: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let uri = format!("postgres://authenticator:secret@127.0.0.1:{}/postgres", cluster.port());
        let mut args = vec![
            "serve",
            "--db-uri",
            &uri,
            "--db-schemas",
            "api",
            "--db-anon-role",
            "web_anon",
            "--server-host",
            "127.0.0.1",
            "--jwt-secret",
            JWT_SECRET,
            "--db-pool",
            "4",
            "--cache-enabled",
            "true",
        ];
        let port_text = port.to_string();
        args.extend(["--server-port", &port_text]);
        args.extend(extra);
        let child = Command::new(env!("CARGO_BIN_EXE_rowgate"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(if std::env::var_os("ROWGATE_TEST_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start rowgate");
        // A watchdog ends the server with this test process, however that ends.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {} 2>/dev/null && kill -0 {pid} 2>/dev/null; do sleep 0.5; done; kill {pid} 2>/dev/null",
                std::process::id(),
                pid = child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let server = Server { child, base: format!("http://127.0.0.1:{port}") };
        server.wait_live();
        server
    }

    /// Waits until the server answers and its cache is live (listener current).
    fn wait_live(&self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if self.metric("rowgate_cache_live") == Some(1.0)
                && request_to(&self.base, "GET", "/ready", &[]).status == 200
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("rowgate at {} did not become live", self.base);
    }

    fn metric(&self, name: &str) -> Option<f64> {
        let r = reqwest::blocking::get(format!("{}/rowgate/metrics", self.base)).ok()?;
        let text = r.text().ok()?;
        text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> crate::support::Resp {
        request_to(&self.base, "GET", path, headers)
    }
}

fn token(sub: &str) -> String {
    let claims = json!({"role": "web_user", "sub": sub});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap()
}

fn n_of(r: &crate::support::Resp) -> i64 {
    r.json()[0]["n"].as_i64().unwrap_or_else(|| panic!("no n in {}", r.body))
}

#[test]
fn a_repeated_read_is_a_hit_and_a_write_through_sql_invalidates_it() {
    let db = db();
    let s = Server::start(&db.cluster, &[]);
    let first = s.get("/items?id=eq.3", &[]);
    assert_eq!((first.status, first.header("x-cache")), (200, Some("miss")), "{}", first.body);
    let second = s.get("/items?id=eq.3", &[]);
    assert_eq!(second.header("x-cache"), Some("hit"));
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("etag"), first.header("etag"));
    assert_eq!(second.header("content-range"), Some("0-0/*"));
    // A different Accept is a different answer.
    let csv = s.get("/items?id=eq.3", &[("accept", "text/csv")]);
    assert_eq!((csv.header("x-cache"), csv.body.as_str()), (Some("miss"), "id,n\n3,3"));

    db.sql("UPDATE api.items SET n = 33 WHERE id = 3");
    let changed = Instant::now();
    loop {
        let r = s.get("/items?id=eq.3", &[]);
        if n_of(&r) == 33 {
            break;
        }
        assert!(changed.elapsed() < Duration::from_secs(1), "still stale after 1 s: {}", r.body);
        std::thread::sleep(Duration::from_millis(5));
    }
    // Through a view, over a table in a schema that is not exposed.
    assert_eq!(s.get("/labelled?id=eq.1", &[]).json(), json!([{"id": 1, "n": 1, "label": "one"}]));
    // (The UPDATE above may still be arriving from the change feed: an answer computed while it
    // was on its way is not stored, so the hit can take another request.)
    let started = Instant::now();
    while s.get("/labelled?id=eq.1", &[]).header("x-cache") != Some("hit") {
        assert!(started.elapsed() < Duration::from_secs(1), "no hit within 1 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    db.sql("UPDATE private.labels SET label = 'uno' WHERE item = 1");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.get("/labelled?id=eq.1", &[]).json(), json!([{"id": 1, "n": 1, "label": "uno"}]));
}

/// Polls `path` until `done` holds of its body, for at most one second.
fn within_a_second(s: &Server, path: &str, done: impl Fn(&serde_json::Value) -> bool) {
    let started = Instant::now();
    loop {
        let r = s.get(path, &[]);
        if done(&r.json()) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{path} still stale after 1 s: {}", r.body);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_read_by_key_is_invalidated_only_by_changes_to_its_rows() {
    read_by_key(db());
}

#[test]
fn a_read_by_key_is_invalidated_only_by_changes_to_its_rows_with_triggers() {
    read_by_key(db_with_triggers());
}

fn read_by_key(db: &Db) {
    let s = Server::start(&db.cluster, &[]);
    let path = "/depts?id=eq.1&select=name,emps(name)";
    assert_eq!(s.get(path, &[]).json(), json!([{"name": "one", "emps": [{"name": "ann"}]}]));
    assert_eq!(s.get(path, &[]).header("x-cache"), Some("hit"));
    // Another dept and another dept's employees: still a hit, once the change has arrived.
    db.sql("UPDATE api.depts SET name = 'deux' WHERE id = 2; INSERT INTO api.emps VALUES (21, 'cy', 2)");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(s.get(path, &[]).header("x-cache"), Some("hit"));
    // An employee moving into dept 1 (its new row has dept 1), and leaving it (its old row).
    db.sql("UPDATE api.emps SET dept = 1 WHERE id = 21");
    within_a_second(&s, path, |b| b[0]["emps"].as_array().is_some_and(|e| e.len() == 2));
    db.sql("UPDATE api.emps SET dept = 2 WHERE id = 21");
    within_a_second(&s, path, |b| b[0]["emps"].as_array().is_some_and(|e| e.len() == 1));
    db.sql("UPDATE api.depts SET name = 'uno' WHERE id = 1");
    within_a_second(&s, path, |b| b[0]["name"] == "uno");
    // A change to another column of a row read by a foreign key.
    let by_dept = "/emps?dept=eq.1&select=name";
    assert_eq!(s.get(by_dept, &[]).json(), json!([{"name": "ann"}]));
    db.sql("UPDATE api.emps SET name = 'anne' WHERE id = 10");
    within_a_second(&s, by_dept, |b| b == &json!([{"name": "anne"}]));
    db.sql("UPDATE api.emps SET name = 'ann' WHERE id = 10");
    within_a_second(&s, by_dept, |b| b == &json!([{"name": "ann"}]));
    // An unlogged table (which the WAL does not carry: a trigger reports it).
    assert_eq!(s.get("/scratch?id=eq.1", &[]).json(), json!([{"id": 1, "n": 1}]));
    db.sql("UPDATE api.scratch SET n = n + 10 WHERE id = 1");
    within_a_second(&s, "/scratch?id=eq.1", |b| b[0]["n"].as_i64().is_some_and(|n| n > 10));
    // A list of keys; TRUNCATE reports the whole table.
    let list = "/emps?id=in.(10,20)&order=id";
    assert_eq!(s.get(list, &[]).json().as_array().map(Vec::len), Some(2));
    db.sql("DELETE FROM api.emps WHERE id = 20");
    within_a_second(&s, list, |b| b.as_array().is_some_and(|e| e.len() == 1));
    db.sql("INSERT INTO api.emps VALUES (20, 'bob', 2)");
    within_a_second(&s, list, |b| b.as_array().is_some_and(|e| e.len() == 2));
}

#[test]
fn ddl_is_seen_at_once_new_tables_are_watched_and_grants_flush() {
    // A cluster of its own: DDL makes every instance on the database bypass its cache until it
    // has reloaded, which the other tests' hit assertions must not see.
    let db = Db::start();
    let s = Server::start(&db.cluster, &[]);
    db.sql(
        "CREATE TABLE api.probe (id int PRIMARY KEY, n int); INSERT INTO api.probe VALUES (1, 1); \
            GRANT SELECT ON api.probe TO web_anon",
    );
    // The DDL made every instance reload its schema cache.
    within_a_second(&s, "/probe?id=eq.1", |b| b == &json!([{"id": 1, "n": 1}]));
    // (Other tests' DDL flushes the cache now and then: retry.)
    assert!((0..50).any(|_| s.get("/probe?id=eq.1", &[]).header("x-cache") == Some("hit")));
    // The event trigger put the change triggers on the new table.
    db.sql("UPDATE api.probe SET n = 2 WHERE id = 1");
    within_a_second(&s, "/probe?id=eq.1", |b| b == &json!([{"id": 1, "n": 2}]));
    db.sql("REVOKE SELECT ON api.probe FROM web_anon");
    let started = Instant::now();
    while s.get("/probe?id=eq.1", &[]).status != 401 {
        assert!(started.elapsed() < Duration::from_secs(1), "a revoked grant still served after 1 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_partition_read_is_invalidated_by_a_write_through_its_parent() {
    let db = db();
    let s = Server::start(&db.cluster, &[]);
    let path = "/events_1?id=eq.1";
    assert_eq!(s.get(path, &[]).json(), json!([{"id": 1, "part": 1, "v": "a"}]));
    assert!((0..100).any(|_| s.get(path, &[]).header("x-cache") == Some("hit")));
    // Only the parent's statement trigger fires for this UPDATE.
    db.sql("UPDATE api.events SET v = 'b' WHERE id = 1");
    within_a_second(&s, path, |b| b[0]["v"] == "b");
}

#[test]
fn what_cannot_be_bounded_is_never_cached() {
    let s = Server::start(&db().cluster, &[]);
    // A view reading the clock, a volatile function.
    for path in ["/recent?id=eq.1", "/rpc/dice"] {
        assert_eq!(s.get(path, &[]).header("x-cache"), Some("bypass"), "{path}");
        assert_eq!(s.get(path, &[]).header("x-cache"), Some("bypass"), "{path}");
    }
    // A stable function is cached (other tests write meanwhile, which invalidates it: retry),
    // and invalidated by a change to any table.
    assert_eq!(s.get("/rpc/total", &[]).header("x-cache"), Some("miss"));
    assert!((0..50).any(|_| s.get("/rpc/total", &[]).header("x-cache") == Some("hit")));
    let before = s.get("/rpc/total", &[]).body;
    let w = send_to(
        &s.base,
        "PATCH",
        "/items?id=eq.200",
        &[("content-type", "application/json")],
        Some(r#"{"n": 2000}"#),
    );
    assert_eq!(w.status, 204, "{}", w.body);
    let after = s.get("/rpc/total", &[]);
    assert_ne!(after.body, before);
    // Errors are not cached; writes are not.
    assert_eq!(s.get("/nope", &[]).header("x-cache"), None);
}

#[test]
fn a_write_acknowledged_by_one_instance_is_read_through_the_other() {
    write_then_read_elsewhere(db());
}

#[test]
fn a_write_acknowledged_by_one_instance_is_read_through_the_other_with_triggers() {
    write_then_read_elsewhere(db_with_triggers());
}

fn write_then_read_elsewhere(db: &Db) {
    let a = Server::start(&db.cluster, &[]);
    let b = Server::start(&db.cluster, &[]);
    // Each instance must know the other before the guarantee holds (heartbeats).
    std::thread::sleep(Duration::from_millis(500));
    for round in 0..30 {
        let warm = b.get("/counters?id=eq.1", &[]);
        assert_eq!(warm.status, 200);
        // (Other tests' DDL makes every instance bypass its cache until it has reloaded: retry.)
        assert!((0..100).any(|_| b.get("/counters?id=eq.1", &[]).header("x-cache") == Some("hit")));
        let value = 1000 + round;
        let w = send_to(
            &a.base,
            "PATCH",
            "/counters?id=eq.1",
            &[("content-type", "application/json")],
            Some(&format!(r#"{{"n": {value}}}"#)),
        );
        assert_eq!(w.status, 204, "{}", w.body);
        assert_eq!(
            n_of(&b.get("/counters?id=eq.1", &[])),
            value,
            "round {round}: instance B served a stale answer"
        );
    }
}

#[test]
fn users_never_see_each_others_cached_rows() {
    let s = Server::start(&db().cluster, &[]);
    let (alice, bob) = (format!("Bearer {}", token("alice")), format!("Bearer {}", token("bob")));
    for _ in 0..3 {
        let a = s.get("/notes?select=owner,body&order=id", &[("authorization", &alice)]);
        assert_eq!(a.json(), json!([{"owner": "alice", "body": "alice secret"}]));
        let b = s.get("/notes?select=owner,body&order=id", &[("authorization", &bob)]);
        assert_eq!(b.json(), json!([{"owner": "bob", "body": "bob secret"}]));
        let anon = s.get("/notes?select=owner,body&order=id", &[]);
        assert_eq!(anon.status, 401, "{}", anon.body);
    }
    assert_eq!(
        s.get("/notes?select=owner,body&order=id", &[("authorization", &alice)]).header("x-cache"),
        Some("hit")
    );
}

#[test]
fn reads_that_depend_on_what_the_key_leaves_out_are_never_cached() {
    // The header setting's name in another case once slipped through: two tenants shared an
    // answer.
    let s = Server::start(&db().cluster, &[]);
    for tenant in ["a", "b", "a"] {
        let r = s.get("/tenant_items?id=eq.1&select=tenant", &[("x-tenant", tenant)]);
        assert_eq!((r.json(), r.header("x-cache")), (json!([{"tenant": tenant}]), Some("bypass")));
    }
    // A policy that reads `sub`, with a cache key of `role` alone: callers who differ in `sub`
    // would share an answer, so it is not cached; with `sub` in the key it is.
    let alice = format!("Bearer {}", token("alice"));
    let narrow = Server::start(&db().cluster, &["--cache-key-claims", "role"]);
    for _ in 0..2 {
        let r = narrow.get("/notes?select=owner", &[("authorization", &alice)]);
        assert_eq!((r.json(), r.header("x-cache")), (json!([{"owner": "alice"}]), Some("bypass")));
    }
    let keyed = Server::start(&db().cluster, &["--cache-key-claims", "role, sub"]);
    assert_eq!(
        keyed.get("/notes?select=owner", &[("authorization", &alice)]).header("x-cache"),
        Some("miss")
    );
    assert!((0..50)
        .any(|_| keyed.get("/notes?select=owner", &[("authorization", &alice)]).header("x-cache")
            == Some("hit")));
}

#[test]
fn answers_may_carry_cache_control_and_revalidate_with_304() {
    let s = Server::start(&db().cluster, &["--cache-control", "items: public, max-age=5; *: no-cache"]);
    let r = s.get("/items?id=eq.7", &[]);
    assert_eq!(r.header("cache-control"), Some("public, max-age=5"));
    assert_eq!(s.get("/labelled?id=eq.7", &[]).header("cache-control"), Some("no-cache"));
    let etag = r.header("etag").unwrap().to_owned();
    let hit = s.get("/items?id=eq.7", &[("if-none-match", &etag)]);
    assert_eq!((hit.status, hit.body.as_str()), (304, ""));
    assert_eq!(hit.header("cache-control"), Some("public, max-age=5"));
}

#[test]
fn the_memory_bound_evicts() {
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let s = Server::start(&db().cluster, &["--cache-max-bytes", "65536", "--admin-server-port", &admin]);
    for id in 1..=100 {
        assert_eq!(s.get(&format!("/big?id=eq.{id}"), &[]).status, 200);
    }
    let bytes = s.metric("rowgate_cache_bytes").unwrap();
    assert!(bytes <= 65536.0, "cache holds {bytes} bytes");
    assert!(s.metric("rowgate_cache_evictions_total").unwrap() > 0.0);
    // The same counters on the admin server's /metrics, as PostgREST's admin-server-port has.
    let text = reqwest::blocking::get(format!("http://127.0.0.1:{admin}/metrics")).unwrap().text().unwrap();
    assert!(text.contains("# TYPE rowgate_cache_evictions_total counter"), "{text}");
    assert_eq!(reqwest::blocking::get(format!("http://127.0.0.1:{admin}/live")).unwrap().status(), 200);
}

#[test]
fn a_postgres_restart_flushes_the_cache_and_bypasses_it_until_listening_again() {
    let db = Db::start();
    let s = Server::start(&db.cluster, &[]);
    assert_eq!(s.get("/items?id=eq.9", &[]).header("x-cache"), Some("miss"));
    assert_eq!(s.get("/items?id=eq.9", &[]).header("x-cache"), Some("hit"));
    db.cluster.stop().expect("stop PostgreSQL");
    // Down: nothing is served from memory.
    std::thread::sleep(Duration::from_millis(300));
    let down = s.get("/items?id=eq.9", &[]);
    assert_ne!(down.header("x-cache"), Some("hit"), "{} {}", down.status, down.body);
    assert_eq!(s.metric("rowgate_cache_live"), Some(0.0));
    db.cluster.restart().expect("start PostgreSQL");
    // Changed while no rowgate listened.
    db.sql("UPDATE api.items SET n = 99 WHERE id = 9");
    s.wait_live();
    assert_eq!(n_of(&s.get("/items?id=eq.9", &[])), 99);
}

#[test]
fn no_stale_read_under_concurrent_writes_through_two_instances_and_sql() {
    stress(db());
}

#[test]
fn no_stale_read_under_concurrent_writes_through_two_instances_and_sql_with_triggers() {
    stress(db_with_triggers());
}

fn stress(db: &'static Db) {
    let servers = Arc::new([Server::start(&db.cluster, &[]), Server::start(&db.cluster, &[])]);
    std::thread::sleep(Duration::from_millis(500));

    let acknowledged = Arc::new(AtomicI64::new(0)); // row 150, written through rowgate
    let sql_log = Arc::new(std::sync::Mutex::new(Vec::<(i64, Instant)>::new())); // row 151, by SQL
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut threads = Vec::new();
    for w in 0..2 {
        let (servers, acknowledged, stop) = (servers.clone(), acknowledged.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = w;
            while !stop.load(Ordering::SeqCst) {
                i += 2;
                let body = format!(r#"{{"n": {i}}}"#);
                let r = send_to(
                    &servers[i as usize % 2].base,
                    "PATCH",
                    &format!("/stress?id=eq.150&n=lt.{i}"),
                    &[("content-type", "application/json")],
                    Some(&body),
                );
                assert_eq!(r.status, 204, "{}", r.body);
                acknowledged.fetch_max(i, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(7));
            }
        }));
    }
    {
        let (log, stop) = (sql_log.clone(), stop.clone());
        let uri = db.cluster.uri("postgres", "postgres");
        threads.push(std::thread::spawn(move || {
            block_on(async {
                let client =
                    rowgate::backend::postgres::connect_without_tls(&uri.parse().unwrap()).await.unwrap();
                let mut i = 0i64;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    client
                        .execute("UPDATE api.stress SET n = $1 WHERE id = 151", &[&(i as i32)])
                        .await
                        .unwrap();
                    log.lock().unwrap().push((i, Instant::now()));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        }));
    }
    let stale = Arc::new(AtomicI64::new(0));
    let mut readers = Vec::new();
    for r in 0..4 {
        let (servers, acknowledged, log, stop, stale) =
            (servers.clone(), acknowledged.clone(), sql_log.clone(), stop.clone(), stale.clone());
        readers.push(std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let s = &servers[(reads as usize + r) % 2];
                let floor = acknowledged.load(Ordering::SeqCst);
                let got = n_of(&s.get("/stress?id=eq.150", &[]));
                if got < floor {
                    eprintln!("stale read of row 150: {got} < acknowledged {floor}");
                    stale.fetch_add(1, Ordering::SeqCst);
                }
                // Changes made through SQL must show within one second.
                let sql_floor = {
                    let log = log.lock().unwrap();
                    log.iter()
                        .rev()
                        .find(|(_, at)| at.elapsed() > Duration::from_secs(1))
                        .map_or(0, |(i, _)| *i)
                };
                let got = n_of(&s.get("/stress?id=eq.151", &[]));
                if got < sql_floor {
                    eprintln!("stale read of row 151: {got} < {sql_floor} committed over 1 s ago");
                    stale.fetch_add(1, Ordering::SeqCst);
                }
                reads += 2;
            }
            reads
        }));
    }
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    threads.into_iter().for_each(|t| t.join().unwrap());
    let reads: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    let hits: f64 = servers.iter().map(|s| s.metric("rowgate_cache_hits_total").unwrap_or(0.0)).sum();
    assert_eq!(stale.load(Ordering::SeqCst), 0, "stale reads among {reads}");
    let writes = acknowledged.load(Ordering::SeqCst);
    eprintln!("stress: {reads} reads, {writes} writes through rowgate, {hits} hits");
    assert!(writes > 20, "too few writes to mean anything");
    assert!(hits > 0.0, "the stress run never hit the cache ({reads} reads)");
}

#[test]
fn every_function_the_install_makes_pins_its_search_path() {
    // `rowgate.cache_notify()` ran with the caller's search path: an object in `public` could
    // shadow a built-in it calls.
    let uri = db().cluster.uri("postgres", "postgres");
    let unpinned: Vec<String> = block_on(async move {
        let config: tokio_postgres::Config = uri.parse().unwrap();
        let client = rowgate::backend::postgres::connect_without_tls(&config).await.unwrap();
        client
            .query(
                "SELECT proname::text FROM pg_proc WHERE pronamespace = 'rowgate'::regnamespace \
                 AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (proconfig), false) ORDER BY 1",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    });
    assert_eq!(unpinned, Vec::<String>::new());
}

#[test]
fn a_cache_without_its_change_feed_says_so() {
    // `--cache-enabled` on a database where `rowgate cache install` never ran answered
    // `X-Cache: bypass` for ever, silently.
    let mut args = crate::support::default_args(&crate::support::harness().superuser_uri);
    args.cache_enabled = Some(true);
    let base = crate::support::start_server(args);
    let metrics = (0..100)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            request_to(&base, "GET", "/rowgate/metrics", &[]).body
        })
        .find(|m| m.contains("rowgate_cache_feed_installed 0"));
    assert!(metrics.is_some(), "no rowgate_cache_feed_installed 0 in /rowgate/metrics");
    assert_eq!(request_to(&base, "GET", "/items?id=eq.1", &[]).header("x-cache"), Some("bypass"));
}
