//! Bounded work per request (issue #20): what a stranger can send — wide and deep bodies,
//! long select lists — gets a 4xx from rowgate, quickly, and the server goes on serving.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{request, request_to, write};

/// `{"k0": 0, "k1": 1, ...}` with `n` distinct keys.
fn wide_object(n: usize) -> String {
    let mut body = String::with_capacity(n * 12);
    body.push('{');
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!("\"k{i}\":{i}"));
    }
    body.push('}');
    body
}

/// The start of a long body, for a failure's message.
fn short(body: &str) -> &str {
    &body[..body.len().min(300)]
}

/// A JSON value nested `depth` arrays deep.
fn deep_array(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn a_body_of_200000_distinct_keys_is_refused_in_well_under_a_second() {
    // The key scan was quadratic, and ran before the table or function was looked up: a
    // 10 MiB object of unique keys held a worker for minutes.
    let body = wide_object(200_000);
    let started = Instant::now();
    let r = write("POST", "/tasks", &[], &body);
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({"code": "RG004", "details": null, "hint": null, "message": "The body has more than 2000 distinct keys"})
        )
    );
    let r = write("POST", "/rpc/no_such_function", &[], &body);
    assert_eq!((r.status, r.json()["code"].as_str()), (404, Some("PGRST202")), "{}", short(&r.body));
    // A function of one json argument takes any object: scanned once, and answered.
    let r = write("POST", "/rpc/echo", &[], &body);
    assert_eq!(r.status, 200, "{}", short(&r.body));
    // (The quadratic scan took minutes for one of these.)
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}

#[test]
fn a_deeply_nested_value_is_a_4xx_from_rowgate() {
    // PostgreSQL's parser ran out of stack on these: a 500 (54001).
    let deep = deep_array(100_000);
    let too_deep = json!({"code": "RG004", "details": null, "hint": null, "message": "The JSON value nests deeper than 512 levels"});
    let r = write("POST", "/rpc/echo", &[], &deep);
    assert_eq!((r.status, r.json()), (400, too_deep.clone()), "rpc");
    let r = write("POST", "/tasks", &[], &format!("{{\"title\": \"x\", \"meta\": {deep}}}"));
    assert_eq!((r.status, r.json()), (400, too_deep.clone()), "insert");
    // A filter's value is bounded by server-max-url-length, within what PostgreSQL parses.
    let r = request("GET", &format!("/tasks?meta=cs.{}", deep_array(8_150)), &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "[]"));
    // As deep as a document goes, and deeper, is fine.
    let r = write("POST", "/rpc/echo", &[], &deep_array(500));
    assert_eq!(r.status, 200, "{}", short(&r.body));
}

#[test]
fn a_select_list_longer_than_postgresql_takes_is_400() {
    // PostgreSQL refused it with a 500 (54011: target lists can have at most 1664 entries).
    let select = vec!["id"; 2_000].join(",");
    let r = request("GET", &format!("/tasks?select={select}"), &[]);
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({"code": "RG004", "details": null, "hint": null, "message": "The select list has more than 1600 items at one level"})
        )
    );
    let r = request("GET", &format!("/tasks?select={}", vec!["*"; 400].join(",")), &[]);
    assert_eq!(r.status, 400, "{}", short(&r.body));
}

/// A server of its own, on the default database, with `tweak` applied to its arguments.
fn server_with(tweak: impl FnOnce(&mut rowgate::config::ServeArgs)) -> String {
    let mut args = crate::support::default_args(&crate::support::harness().superuser_uri);
    tweak(&mut args);
    crate::support::start_server(args)
}

/// Everything the server sends on `stream` until it closes it (or `within` passes).
fn read_all(stream: &mut std::net::TcpStream, within: Duration) -> String {
    use std::io::Read;
    stream.set_read_timeout(Some(within)).unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_body_that_does_not_arrive_in_time_is_408_and_a_head_that_does_not_is_closed() {
    use std::io::Write;
    let base = server_with(|a| a.server_read_timeout = Some(1));
    let addr = base.trim_start_matches("http://");
    // Half a body, then silence: the worker must not wait for it for ever.
    let mut slow = std::net::TcpStream::connect(addr).unwrap();
    let head =
        "POST /tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
    slow.write_all(format!("{head}{{\"title\":").as_bytes()).unwrap();
    let started = Instant::now();
    let answer = read_all(&mut slow, Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"RG005\""), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    // Half a head: the connection is closed.
    let mut slow = std::net::TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET /tasks HTTP/1.1\r\nhost: x\r\n").unwrap();
    let started = Instant::now();
    read_all(&mut slow, Duration::from_secs(5));
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    assert_eq!(request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[]).body, r#"[{"id":1}]"#);
}

#[test]
fn connections_beyond_the_cap_are_answered_503_and_closed() {
    let base = server_with(|a| a.server_max_connections = Some(2));
    let addr = base.trim_start_matches("http://");
    let idle: Vec<std::net::TcpStream> =
        (0..2).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
    // Until the server has accepted both (on a busy machine it may take a while), a new
    // connection is still one of the two allowed, and gets no answer.
    let mut answer = String::new();
    let mut spare = Vec::new();
    for _ in 0..5 {
        let mut next = std::net::TcpStream::connect(addr).unwrap();
        answer = read_all(&mut next, Duration::from_secs(1));
        if !answer.is_empty() {
            break;
        }
        spare.push(next);
    }
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(answer.ends_with(
        r#"{"code":"RG006","details":null,"hint":null,"message":"Too many open connections: retry later"}"#
    ));
    drop((idle, spare));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[]).status, 200);
}

/// How many statements of the test database are running `test.nap` now.
fn napping() -> i64 {
    let uri = crate::support::harness().superuser_uri.clone();
    crate::support::block_on(async move {
        let config: tokio_postgres::Config = uri.parse().unwrap();
        let client = rowgate::backend::postgres::connect_without_tls(&config).await.unwrap();
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%\"nap\"%' \
                 AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    })
}

#[test]
fn a_read_whose_client_goes_away_is_cancelled() {
    use std::io::Write;
    let base = server_with(|a| a.db_pool = Some(1));
    let addr = base.trim_start_matches("http://");
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    client.write_all(b"GET /rpc/nap?seconds=60 HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let started = Instant::now();
    while napping() == 0 {
        assert!(started.elapsed() < Duration::from_secs(5), "the statement never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(client);
    // The statement was left running for its minute, holding the pool's one connection.
    let gone = Instant::now();
    while napping() > 0 {
        assert!(gone.elapsed() < Duration::from_secs(5), "still running after its client left");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, r#"[{"id":1}]"#));
}

/// An SQLite view whose every read runs for minutes.
const ENDLESS: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY);
CREATE VIEW endless AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 100000000000)
  SELECT count(*) AS n FROM n;
INSERT INTO t VALUES (1);";

const ENDLESS_RULES: &str = "[endless]\nselect = { anon = \"true\" }\n[t]\nselect = { anon = \"true\" }\n";

#[test]
fn sqlite_reads_stop_at_the_statement_timeout() {
    let path = tempfile::tempdir().unwrap().keep().join("slow.db");
    let args = rowgate::config::ServeArgs { db_statement_timeout: Some(200), ..Default::default() };
    let base = crate::sqlite::serve_sqlite(&path, ENDLESS, ENDLESS_RULES, args);
    let started = Instant::now();
    let r = request_to(&base, "GET", "/endless", &[]);
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"code": "57014", "message": "canceling statement due to statement timeout",
               "details": null, "hint": null})
    );
}

#[test]
fn sqlite_reads_whose_clients_go_away_stop() {
    use std::io::Write;
    let path = tempfile::tempdir().unwrap().keep().join("abandoned.db");
    let base = crate::sqlite::serve_sqlite(&path, ENDLESS, ENDLESS_RULES, Default::default());
    let addr = base.trim_start_matches("http://");
    // More than the readers there are: each held one until its read ended, minutes later.
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"GET /endless HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    drop(clients);
    let started = Instant::now();
    let r = request_to(&base, "GET", "/t", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, r#"[{"id":1}]"#));
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
}

fn bearer(claims: serde_json::Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(crate::support::JWT_SECRET.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key).unwrap()
}

/// A GET of `path` from the loopback address `from`, with `headers`.
fn get_from(from: [u8; 4], base: &str, path: &str, headers: &[(&str, &str)]) -> crate::support::Resp {
    let client =
        reqwest::blocking::Client::builder().local_address(std::net::IpAddr::from(from)).build().unwrap();
    let mut request = client.get(format!("{base}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let r = request.send().unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    crate::support::Resp { status, headers, body: r.text().unwrap() }
}

#[test]
fn a_client_beyond_its_rate_limit_gets_429_with_retry_after() {
    let base = server_with(|a| a.rate_limit_client = Some("2/min".into()));
    let from = [127, 0, 0, 21];
    for _ in 0..2 {
        assert_eq!(get_from(from, &base, "/tasks?select=id&id=eq.1", &[]).status, 200);
    }
    let r = get_from(from, &base, "/tasks?select=id&id=eq.1", &[]);
    assert_eq!(r.status, 429);
    // The next token is half a minute after the first two (a little less on a slow machine).
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((25..=30).contains(&wait), "{wait}");
    assert_eq!(
        r.json(),
        json!({"code": "RG007", "message": format!("Too many requests from this client address: retry in {wait} s"),
               "details": null, "hint": null})
    );
    // Another client has its own bucket; health checks are never limited.
    assert_eq!(get_from([127, 0, 0, 22], &base, "/tasks?select=id&id=eq.1", &[]).status, 200);
    assert_eq!(get_from(from, &base, "/live", &[]).status, 200);
    let metrics = get_from([127, 0, 0, 23], &base, "/rowgate/metrics", &[]).body;
    assert!(metrics.contains("rowgate_rate_limited_total{limit=\"client\"} 1\n"), "{metrics}");
    assert!(metrics.contains("rowgate_rate_limit_keys{limit=\"client\"} 3\n"), "{metrics}");
}

#[test]
fn each_role_has_its_own_bucket() {
    let base = server_with(|a| a.rate_limit_roles = Some("web_anon=1/min, *=2/min".into()));
    assert_eq!(request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[]).status, 200);
    let r = request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (429, Some("RG007")));
    // Any other role: two a minute, whoever sends them.
    let (alice, bob) = (
        bearer(json!({"role": "web_user", "sub": "alice"})),
        bearer(json!({"role": "web_user", "sub": "bob"})),
    );
    let get = |token: &str| {
        let auth = format!("Bearer {token}");
        request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[("Authorization", &auth)]).status
    };
    assert_eq!((get(&alice), get(&bob), get(&alice)), (200, 200, 429));
}

#[test]
fn each_api_key_has_its_own_bucket() {
    let base = server_with(|a| a.rate_limit_api_key = Some("1/min".into()));
    let (one, two) =
        (bearer(json!({"role": "web_anon", "app": 1})), bearer(json!({"role": "web_anon", "app": 2})));
    let get = |key: &str| request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[("apikey", key)]).status;
    assert_eq!((get(&one), get(&two), get(&one)), (200, 200, 429));
    // Requests without a key are not counted against any.
    assert_eq!(request_to(&base, "GET", "/tasks?select=id&id=eq.1", &[]).status, 200);
}

#[test]
fn behind_a_trusted_proxy_the_forwarded_client_is_limited() {
    let base = server_with(|a| {
        a.rate_limit_client = Some("1/min".into());
        a.server_trusted_proxies = Some("127.0.0.31, 10.9.0.0/16".into());
    });
    let proxy = [127, 0, 0, 31];
    let forwarded = |chain: &str| {
        get_from(proxy, &base, "/tasks?select=id&id=eq.1", &[("x-forwarded-for", chain)]).status
    };
    assert_eq!(forwarded("203.0.113.5"), 200);
    assert_eq!(forwarded("203.0.113.6"), 200);
    // What the client wrote itself (the start of the list) does not make it another client; a
    // second trusted proxy in between is seen through.
    assert_eq!(forwarded("198.51.100.1, 203.0.113.5"), 429);
    assert_eq!(forwarded("203.0.113.6, 10.9.1.1"), 429);
    // An untrusted peer's header is ignored: it is its own client.
    let direct = |chain: &str| {
        get_from([127, 0, 0, 32], &base, "/tasks?select=id&id=eq.1", &[("x-forwarded-for", chain)]).status
    };
    assert_eq!((direct("203.0.113.7"), direct("203.0.113.8")), (200, 429));
}

#[test]
fn rate_limit_settings_are_checked() {
    for (key, value) in
        [("rate-limit-client", "100"), ("rate-limit-roles", "anon"), ("server-trusted-proxies", "x")]
    {
        let mut args = rowgate::config::ServeArgs::default();
        match key {
            "rate-limit-client" => args.rate_limit_client = Some(value.into()),
            "rate-limit-roles" => args.rate_limit_roles = Some(value.into()),
            _ => args.server_trusted_proxies = Some(value.into()),
        }
        let e = rowgate::config::Config::load(&args).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(key), "{key} = {value}: {e}");
    }
}

#[test]
fn the_auth_endpoints_answer_a_rate_limit_as_gotrue_does() {
    let path = tempfile::tempdir().unwrap().keep().join("limited.db");
    let args = rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        rate_limit_client: Some("1/min".into()),
        ..Default::default()
    };
    let base = crate::sqlite::serve_sqlite(&path, "CREATE TABLE t (id INTEGER PRIMARY KEY);", "", args);
    let login = r#"{"email": "a@example.com", "password": "wrong password"}"#;
    let json = [("content-type", "application/json")];
    let r = crate::support::send_to(&base, "POST", "/auth/v1/token?grant_type=password", &json, Some(login));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = crate::support::send_to(&base, "POST", "/auth/v1/token?grant_type=password", &json, Some(login));
    assert_eq!(r.status, 429);
    // A minute after the first login (a password check takes a while on a busy machine).
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((50..=60).contains(&wait), "{wait}");
    assert_eq!(
        r.json(),
        json!({"code": 429, "error_code": "over_request_rate_limit", "msg": "rate limit of the client address reached"})
    );
}
