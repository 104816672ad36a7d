//! What a pooled connection carries from one request to the next: session settings set by one
//! caller never serve another, whatever fails or is abandoned midway (each test runs its own
//! server with a pool of one connection, so consecutive requests share it).

use serde_json::json;

use crate::support::{default_args, harness, send_to, start_server};

#[test]
fn a_read_abandoned_by_its_client_leaves_no_setting_behind_for_the_next_write() {
    use std::io::Write as _;
    // One pooled connection: the abandoned read's and the write's. The read turns the
    // connection read-only (reads run under `default_transaction_read_only`) and is dropped
    // while its query runs; the write must not inherit that.
    crate::support::sql(
        "CREATE OR REPLACE FUNCTION test.slow_one() RETURNS int LANGUAGE sql STABLE AS 'SELECT 1 FROM pg_sleep(0.4)'; \
         GRANT EXECUTE ON FUNCTION test.slow_one() TO web_anon",
    );
    let mut args = crate::support::default_args(&crate::support::harness().superuser_uri);
    args.db_pool = Some(1);
    let base = crate::support::start_server(args);
    let write = || {
        crate::support::send_to(
            &base,
            "POST",
            "/drop_box",
            &[("Content-Type", "application/json"), ("Prefer", "tx=rollback")],
            Some(r#"{"id": 1, "note": "kept?"}"#),
        )
        .status
    };
    // Prepared on first use; from then on the settings travel in the query's round trip.
    assert_eq!(crate::support::send_to(&base, "GET", "/rpc/slow_one", &[], None).status, 200);
    assert_eq!(write(), 201);
    let addr = base.trim_start_matches("http://");
    let mut abandoned = std::net::TcpStream::connect(addr).expect("connect");
    write!(abandoned, "GET /rpc/slow_one HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
    std::thread::sleep(std::time::Duration::from_millis(150));
    drop(abandoned);
    assert_eq!(write(), 201);
}

#[test]
fn a_write_on_a_connection_a_read_left_runs_as_its_own_caller_and_leaves_it_as_it_was() {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    // A write whose response cannot fail sends its settings transaction-local, with the
    // statement and the COMMIT: it must run as its caller, read-write, and leave the session
    // settings of the connection (here the anonymous reader's) as they were.
    crate::support::sql(
        "CREATE TABLE test.who_wrote (id int PRIMARY KEY, by_role text DEFAULT current_user, \
           sub text DEFAULT current_setting('request.jwt.claims', true)::json ->> 'sub'); \
         GRANT SELECT, INSERT ON test.who_wrote TO web_anon, web_user",
    );
    let mut args = default_args(&harness().superuser_uri);
    args.db_pool = Some(1);
    let base = start_server(args);
    let jwt = encode(
        &Header::new(Algorithm::HS256),
        &json!({"role": "web_user", "sub": "ann"}),
        &EncodingKey::from_secret(crate::support::JWT_SECRET.as_bytes()),
    )
    .expect("token");
    let bearer = format!("Bearer {jwt}");
    let insert = |id: i32, auth: Option<&str>| {
        let mut headers = vec![("Content-Type", "application/json"), ("Prefer", "return=minimal")];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        send_to(&base, "POST", "/who_wrote", &headers, Some(&format!(r#"{{"id": {id}}}"#))).status
    };
    let read = || send_to(&base, "GET", "/who_wrote?order=id", &[], None);
    // Twice each: the first prepares the statement, the second takes the one round trip.
    for round in 0..2 {
        assert_eq!(read().status, 200);
        assert_eq!(insert(10 * round + 1, Some(&bearer)), 201);
        assert_eq!(insert(10 * round + 2, None), 201);
    }
    // A failed one ends its transaction too (its queued COMMIT rolls the aborted one back), and
    // the next request on the connection runs cleanly behind it.
    assert_eq!(insert(1, None), 409);
    assert_eq!(insert(3, None), 201);
    assert_eq!(
        read().json(),
        json!([
            {"id": 1, "by_role": "web_user", "sub": "ann"},
            {"id": 2, "by_role": "web_anon", "sub": null},
            {"id": 3, "by_role": "web_anon", "sub": null},
            {"id": 11, "by_role": "web_user", "sub": "ann"},
            {"id": 12, "by_role": "web_anon", "sub": null}
        ])
    );
}

#[test]
fn a_token_whose_role_cannot_be_set_runs_nothing_as_the_connections_previous_caller() {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    // The role switch is the one setting that can fail; the query pipelined behind it must not
    // run at all then (it would run as whoever used the connection before). The functions
    // record who ran them in a session setting, which the next call reads back.
    crate::support::sql(
        "CREATE OR REPLACE FUNCTION test.note_caller() RETURNS text LANGUAGE sql STABLE \
           AS $$ SELECT set_config('test.last_caller', current_user, false) $$; \
         CREATE OR REPLACE FUNCTION test.forget_caller() RETURNS text LANGUAGE sql STABLE \
           AS $$ SELECT set_config('test.last_caller', 'nobody', false) $$; \
         CREATE OR REPLACE FUNCTION test.last_caller() RETURNS text LANGUAGE sql STABLE \
           AS $$ SELECT current_setting('test.last_caller', true) $$; \
         GRANT EXECUTE ON FUNCTION test.note_caller(), test.forget_caller(), test.last_caller() TO web_anon, web_user",
    );
    let mut args = default_args(&harness().superuser_uri);
    args.db_pool = Some(1);
    let base = start_server(args);
    let bearer = |role: &str| {
        let jwt = encode(
            &Header::new(Algorithm::HS256),
            &json!({ "role": role }),
            &EncodingKey::from_secret(crate::support::JWT_SECRET.as_bytes()),
        )
        .expect("token");
        format!("Bearer {jwt}")
    };
    let user = bearer("web_user");
    let call = |path: &str, auth: &str| send_to(&base, "GET", path, &[("Authorization", auth)], None);
    // Prepared on the connection as web_user, then the record cleared.
    assert_eq!(call("/rpc/note_caller", &user).status, 200);
    assert_eq!(call("/rpc/forget_caller", &user).status, 200);
    let refused = call("/rpc/note_caller", &bearer("no_such_role"));
    assert!(refused.status >= 400, "{} {}", refused.status, refused.body);
    assert_eq!(call("/rpc/last_caller", &user).json(), json!("nobody"));
}
