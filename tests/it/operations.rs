//! Operations: health endpoints, schema reloads, configuration errors, graceful shutdown and
//! reconnection after PostgreSQL restarts. Some tests run the real `rowgate` binary.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rowgate::cluster::TempCluster;
use serde_json::json;

use crate::support::{
    authenticator_uri, block_on, default_args, get, harness, request_to, sql, start_server, wait_ready,
};

const ROWGATE: &str = env!("CARGO_BIN_EXE_rowgate");

/// Polls `path` until it answers `status` or ten seconds pass.
fn eventually(base: &str, path: &str, status: u16) -> crate::support::Resp {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = request_to(base, "GET", path, &[]);
        if r.status == status || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `rowgate serve` process on a free port, killed when dropped.
struct Process {
    child: Child,
    base: String,
}

impl Process {
    fn start(extra: &[&str]) -> Process {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let uri = authenticator_uri(&harness().superuser_uri);
        let port_text = port.to_string();
        let mut args = vec![
            "serve",
            "--db-uri",
            &uri,
            "--db-schemas",
            "test",
            "--db-anon-role",
            "web_anon",
            "--server-host",
            "127.0.0.1",
            "--server-port",
            &port_text,
        ];
        args.extend_from_slice(extra);
        let child = Command::new(ROWGATE)
            .args(&args)
            .env_remove("ROWGATE_DB_URI")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rowgate");
        let base = format!("http://127.0.0.1:{port}");
        wait_ready(&base);
        Process { child, base }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill").args(["-s", name, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn live_and_ready() {
    let base = &harness().base;
    assert_eq!(request_to(base, "GET", "/live", &[]).status, 200);
    assert_eq!(request_to(base, "GET", "/ready", &[]).status, 200);
}

#[test]
fn the_health_command_checks_readiness() {
    let ready =
        Command::new(ROWGATE).args(["health", &format!("{}/ready", harness().base)]).output().unwrap();
    assert!(ready.status.success(), "{}", String::from_utf8_lossy(&ready.stderr));
    // Nothing listens on a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let down =
        Command::new(ROWGATE).args(["health", &format!("http://127.0.0.1:{port}/ready")]).output().unwrap();
    assert_eq!(down.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert!(stderr.starts_with(&format!("rowgate: http://127.0.0.1:{port}/ready: ")), "{stderr}");
    // A 404 is no health.
    let wrong =
        Command::new(ROWGATE).args(["health", &format!("{}/nope/nope", harness().base)]).output().unwrap();
    assert_eq!(wrong.status.code(), Some(1));
}

#[test]
fn notify_reloads_the_schema_cache() {
    let _ = harness();
    sql("DROP TABLE IF EXISTS test.added_by_notify; CREATE TABLE test.added_by_notify (id int);
         INSERT INTO test.added_by_notify VALUES (7); GRANT SELECT ON test.added_by_notify TO web_anon;");
    assert_eq!(get("/added_by_notify").status, 404);
    sql("NOTIFY rowgate, 'reload schema'");
    let r = eventually(&harness().base, "/added_by_notify", 200);
    assert_eq!(r.json(), json!([{"id": 7}]));
}

#[test]
fn sigusr1_reloads_the_schema_cache() {
    let _ = harness();
    let p = Process::start(&["--db-channel-enabled", "false"]);
    sql("DROP TABLE IF EXISTS test.added_by_signal; CREATE TABLE test.added_by_signal (id int);
         GRANT SELECT ON test.added_by_signal TO web_anon;");
    assert_eq!(request_to(&p.base, "GET", "/added_by_signal", &[]).status, 404);
    p.signal("USR1");
    assert_eq!(eventually(&p.base, "/added_by_signal", 200).status, 200);
}

#[test]
fn sigterm_lets_in_flight_requests_finish() {
    let _ = harness();
    sql("CREATE OR REPLACE VIEW test.takes_a_second AS SELECT pg_sleep(1)::text AS slept;
         GRANT SELECT ON test.takes_a_second TO web_anon;");
    let mut p = Process::start(&[]);
    let base = p.base.clone();
    let slow = std::thread::spawn(move || request_to(&base, "GET", "/takes_a_second", &[]));
    std::thread::sleep(Duration::from_millis(300));
    p.signal("TERM");
    let r = slow.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let status = p.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// Runs `rowgate serve` with `args` and returns its exit code and stderr.
fn serve_fails(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(ROWGATE)
        .arg("serve")
        .args(args)
        .env_remove("ROWGATE_DB_URI")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_configuration_stops_with_status_2_and_one_line() {
    // (flags, environment, expected stderr)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec!["--db-uri", "postgres://x@localhost/db", "--db-pool", "many"],
            vec![],
            "rowgate: invalid value 'many' for '--db-pool <N>': invalid digit found in string\n",
        ),
        (
            vec!["--db-uri", "postgres://x@localhost/db"],
            vec![("ROWGATE_DB_POOL", "0")],
            "rowgate: invalid db-pool: must be at least 1\n",
        ),
        (
            vec!["--db-uri", "postgres://x@localhost/db", "--log-level", "loud"],
            vec![],
            "rowgate: invalid value 'loud' for '--log-level <LEVEL>'\n",
        ),
    ];
    for (args, env, want) in cases {
        let (code, stderr) = serve_fails(&args, &env);
        assert_eq!((code, stderr.as_str()), (Some(2), want), "{args:?} {env:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rowgate.toml");
    std::fs::write(&file, "db-uri = \"postgres://x@localhost/db\"\ndb-poool = 3\n").unwrap();
    let (code, stderr) = serve_fails(&["--config", file.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("unknown field `db-poool`"), "{stderr}");
}

#[test]
fn cli_flags_override_environment_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rowgate.toml");
    std::fs::write(&file, "db-uri = \"postgres://file@localhost/db\"\ndb-pool = 3\n").unwrap();
    let args = rowgate::config::ServeArgs { config: Some(file), db_pool: Some(7), ..Default::default() };
    let c = rowgate::config::Config::load(&args).unwrap();
    assert_eq!((c.db.uri.as_str(), c.db.pool), ("postgres://file@localhost/db", 7));
}

#[test]
fn reconnects_after_postgresql_restarts() {
    let cluster = TempCluster::start().expect("a second throwaway PostgreSQL");
    block_on(cluster.run_sql(
        "postgres",
        "CREATE ROLE \"Authenticator\" LOGIN NOINHERIT; CREATE ROLE web_anon NOLOGIN;
         GRANT web_anon TO \"Authenticator\"; CREATE SCHEMA test; GRANT USAGE ON SCHEMA test TO web_anon;
         CREATE TABLE test.t (id int); INSERT INTO test.t VALUES (1); GRANT SELECT ON test.t TO web_anon;",
    ))
    .unwrap();
    let mut args = default_args(&cluster.uri("postgres", "postgres"));
    args.db_schemas = Some("test".into());
    args.db_pool_acquisition_timeout = Some(2);
    let base = start_server(args);
    assert_eq!(request_to(&base, "GET", "/t", &[]).status, 200);

    // Load from four clients throughout the outage: every answer is 200 or a clean 503.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (base, stop) = (base.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut statuses = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = request_to(&base, "GET", "/t", &[]);
                    if r.status == 503 {
                        assert!(r.header("retry-after").is_some(), "503 without Retry-After");
                    }
                    statuses.push(r.status);
                }
                statuses
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    cluster.stop().unwrap();
    for _ in 0..5 {
        let r = request_to(&base, "GET", "/t", &[]);
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(r.header("retry-after").is_some());
    }
    assert_eq!(request_to(&base, "GET", "/ready", &[]).status, 503);

    cluster.restart().unwrap();
    let r = eventually(&base, "/t", 200);
    assert_eq!(r.json(), json!([{"id": 1}]));
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for handle in load {
        let statuses = handle.join().expect("load thread");
        assert!(statuses.iter().all(|s| *s == 200 || *s == 503), "{statuses:?}");
        assert_eq!(statuses.last(), Some(&200), "requests succeed again after the restart");
    }
}

#[test]
fn pool_timeout_is_504() {
    sql("CREATE OR REPLACE VIEW test.holds_a_connection AS SELECT pg_sleep(2)::text AS slept;
         GRANT SELECT ON test.holds_a_connection TO web_anon;");
    let mut args = default_args(&harness().superuser_uri);
    args.db_pool = Some(1);
    args.db_pool_acquisition_timeout = Some(1);
    let base = start_server(args);
    let holder = {
        let base = base.clone();
        std::thread::spawn(move || request_to(&base, "GET", "/holds_a_connection", &[]))
    };
    std::thread::sleep(Duration::from_millis(300));
    let r = request_to(&base, "GET", "/items?select=id&limit=1", &[]);
    assert_eq!(r.status, 504, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"code": "PGRST003", "details": null, "hint": null,
               "message": "Timed out acquiring connection from connection pool."})
    );
    assert_eq!(holder.join().unwrap().status, 200);
}

#[test]
fn oversized_headers_are_431() {
    let big = "x".repeat(40_000);
    let r = request_to(&harness().base, "GET", "/items?limit=1", &[("X-Big", &big)]);
    assert_eq!(r.status, 431);
}

#[test]
fn a_column_type_change_is_picked_up_after_a_reload() {
    let _ = harness();
    sql("DROP TABLE IF EXISTS test.retyped; CREATE TABLE test.retyped (id int, v int);
         INSERT INTO test.retyped VALUES (1, 2); GRANT SELECT ON test.retyped TO web_anon;
         NOTIFY rowgate, 'reload schema';");
    let base = &harness().base;
    eventually(base, "/retyped", 200);
    // Prepare the statement on every pooled connection.
    for _ in 0..8 {
        assert_eq!(request_to(base, "GET", "/retyped", &[]).json(), json!([{"id": 1, "v": 2}]));
    }
    // Until the reload lands, an answer is either right or a retryable 503: never a value
    // rendered as the old type.
    sql("ALTER TABLE test.retyped ALTER COLUMN v TYPE text;");
    let r = request_to(base, "GET", "/retyped", &[]);
    assert_eq!((r.status, r.header("retry-after")), (503, Some("1")), "{}", r.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = request_to(base, "GET", "/retyped", &[]);
        if r.status == 200 && r.json() == json!([{"id": 1, "v": "2"}]) {
            break;
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(Instant::now() < deadline, "still {}", r.body);
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..8 {
        assert_eq!(request_to(base, "GET", "/retyped", &[]).json(), json!([{"id": 1, "v": "2"}]));
    }
}

/// `rowgate cluster start --dir D` and `cluster stop --dir D` with D relative to where they
/// are run, as a user types them.
#[test]
fn the_cluster_command_takes_a_relative_directory() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().expect("a directory");
    // PostgreSQL runs as `postgres` when the tests run as root: it must reach the directory.
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cluster = |args: &[&str]| {
        Command::new(ROWGATE)
            .arg("cluster")
            .args(args)
            .current_dir(parent.path())
            .output()
            .expect("rowgate cluster")
    };
    let started = cluster(&["start", "--dir", "pg"]);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&started.stdout).expect("JSON");
    assert_eq!(answer["data"], json!(parent.path().join("pg").join("data")));
    let stopped = cluster(&["stop", "--dir", "pg"]);
    assert!(stopped.status.success(), "{}", String::from_utf8_lossy(&stopped.stderr));
    assert!(!parent.path().join("pg/data/postmaster.pid").exists(), "the cluster still runs");
}

#[test]
fn the_keys_command_prints_the_anon_and_service_role_keys() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["keys", "--db-uri", "sqlite::memory:", "--db-anon-role", "anon"])
        .env("ROWGATE_JWT_SECRET", crate::support::JWT_SECRET)
        .output()
        .expect("rowgate keys");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let key = |name: &str| {
        let line = text.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).expect(name);
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.required_spec_claims.clear();
        let secret = jsonwebtoken::DecodingKey::from_secret(crate::support::JWT_SECRET.as_bytes());
        jsonwebtoken::decode::<serde_json::Value>(line, &secret, &validation)
            .expect("a key signed with jwt-secret")
            .claims
    };
    assert_eq!(key("ANON_KEY")["role"], "anon");
    let service = key("SERVICE_ROLE_KEY");
    assert_eq!(service["role"], "service_role");
    assert!(service["exp"].as_u64().unwrap() > service["iat"].as_u64().unwrap() + 9 * 365 * 86400);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["keys", "--db-uri", "sqlite::memory:"])
        .env_remove("ROWGATE_JWT_SECRET")
        .output()
        .expect("rowgate keys");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("jwt-secret"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
