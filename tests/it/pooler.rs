//! rowgate behind a real PgBouncer in transaction mode, as Supabase users run it behind
//! Supavisor: `db-prepared-statements = false` sends every statement unnamed and every setting
//! transaction-local, and `db-uri-direct` carries LISTEN. PgBouncer keeps fewer server sessions
//! than rowgate opens connections, so requests of different callers share server sessions.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::pgbouncer::through_pgbouncer;
use crate::support::{
    authenticator_uri, default_args, harness, request_to, send_to, sql, start_server, JWT_SECRET,
};

/// A rowgate whose `db-uri` goes through PgBouncer.
fn pooled() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let superuser = &harness().superuser_uri;
        start_server(rowgate::config::ServeArgs {
            db_uri: Some(through_pgbouncer(&authenticator_uri(superuser))),
            db_uri_direct: Some(authenticator_uri(superuser)),
            db_prepared_statements: Some(false),
            db_pool: Some(6),
            ..default_args(superuser)
        })
    })
}

fn token(claims: Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .expect("a token")
}

#[test]
fn postgrest_s_recorded_answers_are_the_same_through_pgbouncer() {
    let (compared, failures) = crate::oracle::replay(pooled());
    assert!(compared > 300, "only {compared} requests compared");
    assert!(
        failures.is_empty(),
        "{} of {compared} requests differ through PgBouncer:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn concurrent_callers_each_see_their_own_rows_through_shared_server_sessions() {
    let base = pooled();
    let callers: Vec<(Option<String>, Vec<i64>)> = vec![
        (None, vec![1, 4]),
        (Some(token(json!({"role": "web_user", "sub": "alice"}))), vec![1, 2, 4]),
        (Some(token(json!({"role": "web_user", "sub": "bob"}))), vec![1, 3, 4]),
    ];
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let callers = callers.clone();
            std::thread::spawn(move || {
                for i in 0..40 {
                    let (bearer, want) = &callers[(t + i) % callers.len()];
                    let auth = bearer.as_ref().map(|b| format!("Bearer {b}"));
                    let mut headers = Vec::new();
                    if let Some(a) = &auth {
                        headers.push(("Authorization", a.as_str()));
                    }
                    let r = request_to(base, "GET", "/documents?select=id&order=id", &headers);
                    assert_eq!(r.status, 200, "{}", r.body);
                    let ids: Vec<i64> =
                        r.json().as_array().unwrap().iter().map(|d| d["id"].as_i64().unwrap()).collect();
                    assert_eq!(&ids, want, "caller {bearer:?} saw another caller's rows");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no caller saw another's rows");
    }
}

#[test]
fn writes_commit_and_settings_end_with_their_transaction() {
    sql("CREATE TABLE test.pooled_notes (id integer PRIMARY KEY, note text, mood test.mood);
         GRANT ALL ON test.pooled_notes TO web_anon;
         NOTIFY rowgate, 'reload schema';");
    let base = pooled();
    let body = r#"[{"id": 1, "note": "first", "mood": "happy"}, {"id": 2, "note": "second", "mood": "sad"}]"#;
    let created = wait_for(|| {
        let r = send_to(base, "POST", "/pooled_notes", &[("Prefer", "return=representation")], Some(body));
        (r.status != 404).then_some(r)
    });
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.json(),
        json!([{"id": 1, "note": "first", "mood": "happy"}, {"id": 2, "note": "second", "mood": "sad"}])
    );
    let patched = send_to(
        base,
        "PATCH",
        "/pooled_notes?id=eq.2",
        &[("Prefer", "return=minimal")],
        Some(r#"{"mood": "ok"}"#),
    );
    assert_eq!(patched.status, 204, "{}", patched.body);
    let deleted = send_to(base, "DELETE", "/pooled_notes?id=eq.1", &[], None);
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let read = request_to(base, "GET", "/pooled_notes", &[]);
    assert_eq!(read.json(), json!([{"id": 2, "note": "second", "mood": "ok"}]));
    // A time zone asked for lasts one request, on whichever server session it ran.
    let zoned =
        request_to(base, "GET", "/types?select=c_timestamptz&limit=1", &[("Prefer", "timezone=Asia/Tokyo")]);
    assert!(zoned.body.contains("+09:00"), "{}", zoned.body);
    for _ in 0..(2 * crate::support::pgbouncer::SERVER_SESSIONS) {
        let plain = request_to(base, "GET", "/types?select=c_timestamptz&limit=1", &[]);
        assert!(
            !plain.body.contains("+09:00"),
            "a later request ran in the earlier one's time zone: {}",
            plain.body
        );
    }
}

#[test]
fn a_type_created_after_start_is_read_once_the_schema_reloads() {
    let base = pooled();
    assert_eq!(request_to(base, "GET", "/types?select=id&limit=1", &[]).status, 200);
    sql("CREATE TYPE test.pooled_size AS ENUM ('small', 'large');
         CREATE TABLE test.pooled_boxes (id integer PRIMARY KEY, size test.pooled_size);
         INSERT INTO test.pooled_boxes VALUES (1, 'large');
         GRANT SELECT ON test.pooled_boxes TO web_anon;
         NOTIFY rowgate, 'reload schema';");
    let read = wait_for(|| {
        let r = request_to(base, "GET", "/pooled_boxes", &[]);
        (r.status == 200).then_some(r)
    });
    assert_eq!(read.json(), json!([{"id": 1, "size": "large"}]));
}

#[test]
fn the_response_cache_without_a_direct_connection_stops_the_start() {
    let superuser = &harness().superuser_uri;
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["serve", "--db-uri", &through_pgbouncer(&authenticator_uri(superuser))])
        .args(["--db-prepared-statements", "false", "--cache-enabled", "true"])
        .args(["--db-schemas", "test", "--db-anon-role", "web_anon", "--server-host", "127.0.0.1"])
        .args(["--server-port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rowgate");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("rowgate kept serving the cache behind a pooler without a direct connection");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("give a direct connection in db-uri-direct"), "{stderr}");
}

/// Retries `attempt` for up to 20 s (a schema reload is asynchronous).
fn wait_for<T>(mut attempt: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(done) = attempt() {
            return done;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "gave up waiting");
        std::thread::sleep(Duration::from_millis(100));
    }
}
