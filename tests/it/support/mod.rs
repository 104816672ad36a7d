//! The test harness: one throwaway PostgreSQL per test binary (or the database in
//! `ROWGATE_TEST_DB_URI`), the fixture schema loaded into it, and rowgate servers running
//! in-process on loopback ports. `request` is the only code that knows how requests are sent.

use std::net::TcpListener as StdListener;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rowgate::cluster::TempCluster;
use rowgate::config::{Config, ServeArgs};

/// The HMAC secret of the default server (and of the tokens in tests/oracle/requests.txt).
pub const JWT_SECRET: &str = "reallyreallyreallyreallyverysafe";

const FIXTURE: &str = include_str!("../../fixtures/schema.sql");

/// The shared database and the default server.
pub struct Harness {
    /// Superuser connection URI of the test database.
    pub superuser_uri: String,
    /// Base URL of the default rowgate server (schemas test, v2; anon role web_anon).
    pub base: String,
    /// The throwaway cluster, unless ROWGATE_TEST_DB_URI was given; held so it lives as long
    /// as the tests.
    _cluster: Option<TempCluster>,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();

/// The shared harness, started on first use. A missing PostgreSQL fails the tests loudly.
pub fn harness() -> &'static Harness {
    HARNESS.get_or_init(|| {
        if std::env::var_os("ROWGATE_TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt().with_env_filter("rowgate=debug").try_init();
        }
        let (cluster, superuser_uri) = match std::env::var("ROWGATE_TEST_DB_URI") {
            Ok(uri) if !uri.is_empty() => (None, uri),
            _ => {
                let cluster = TempCluster::start()
                    .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL for the tests: {e}"));
                stop_with_this_process(&cluster);
                let uri = cluster.uri("postgres", "postgres");
                (Some(cluster), uri)
            }
        };
        block_on(async {
            let cfg: tokio_postgres::Config = superuser_uri.parse().expect("superuser URI");
            let client =
                rowgate::backend::postgres::connect_without_tls(&cfg).await.expect("connect as superuser");
            client.batch_execute(FIXTURE).await.expect("load tests/fixtures/schema.sql");
        });
        let base = start_server(default_args(&superuser_uri));
        Harness { superuser_uri, base, _cluster: cluster }
    })
}

/// The arguments of the default server.
pub fn default_args(superuser_uri: &str) -> ServeArgs {
    ServeArgs {
        db_uri: Some(authenticator_uri(superuser_uri)),
        db_schemas: Some("test, v2".into()),
        db_anon_role: Some("web_anon".into()),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        db_pool: Some(4),
        jwt_secret: Some(JWT_SECRET.into()),
        // The oracle's writes all ask for `Prefer: tx=rollback`.
        db_tx_end: Some(rowgate::config::TxEnd::CommitAllowOverride),
        db_aggregates_enabled: Some(true),
        db_plan_enabled: Some(true),
        ..ServeArgs::default()
    }
}

/// The URI of the `Authenticator` login role on the test database.
pub fn authenticator_uri(superuser_uri: &str) -> String {
    let cfg: tokio_postgres::Config = superuser_uri.parse().expect("superuser URI");
    let host = match cfg.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".into(),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    let db = cfg.get_dbname().unwrap_or("postgres");
    format!("postgres://Authenticator:secret@{host}:{port}/{db}")
}

/// Held while a test changes the test cluster's roles (`rowgate install`, `ALTER ROLE`): they
/// are cluster-wide, and PostgreSQL refuses to change one from two sessions at once ("tuple
/// concurrently updated").
pub fn roles_lock() -> std::sync::MutexGuard<'static, ()> {
    static ROLES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ROLES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts an in-process rowgate with `args` on a free loopback port; returns its base URL.
/// It runs until the test binary exits.
pub fn start_server(mut args: ServeArgs) -> String {
    // A port given in advance is kept (another server must know it first); else any.
    let listener =
        StdListener::bind(("127.0.0.1", args.server_port.unwrap_or(0))).expect("bind a loopback port");
    let addr = listener.local_addr().expect("local addr");
    listener.set_nonblocking(true).expect("nonblocking");
    args.server_port = Some(addr.port());
    let config = Arc::new(Config::load(&args).expect("test config"));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            let state = rowgate::server::start_state(config).expect("rowgate starts");
            rowgate::http::serve(listener, state, std::future::pending(), Duration::from_secs(1)).await;
        });
    });
    let base = format!("http://{addr}");
    wait_ready(&base);
    base
}

/// Waits until `/ready` answers 200 (pool and schema cache ready).
pub fn wait_ready(base: &str) {
    let client = reqwest::blocking::Client::new();
    for _ in 0..200 {
        if let Ok(r) = client.get(format!("{base}/ready")).send() {
            if r.status() == 200 {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("rowgate at {base} did not become ready");
}

/// Runs a future on a fresh runtime (tests are synchronous).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

/// A database `name` of its own on the test cluster, made afresh, with realtime installed (its
/// change feed connecting as `Replicator`); its superuser's URI. Hold [`roles_lock`]: the
/// install grants cluster-wide roles.
pub fn realtime_database(name: &str) -> String {
    sql(r#"DO $$ BEGIN CREATE ROLE "Replicator" LOGIN PASSWORD 'secret';
           EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"#);
    sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    sql(&format!("CREATE DATABASE {name}"));
    let base = &harness().superuser_uri;
    let superuser = format!("{}/{name}", &base[..base.rfind('/').expect("a database in the URI")]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["realtime", "install", "--db-uri", &superuser, "--replication-role", "Replicator"])
        .output()
        .expect("rowgate realtime install");
    assert!(out.status.success(), "realtime install: {}", String::from_utf8_lossy(&out.stderr));
    superuser
}

/// Runs SQL as the superuser on the test database.
pub fn sql(statements: &str) {
    sql_at(&harness().superuser_uri, statements);
}

/// Runs SQL on the database at `uri`.
pub fn sql_at(uri: &str, statements: &str) {
    let uri = uri.to_owned();
    block_on(async move {
        let cfg: tokio_postgres::Config = uri.parse().expect("uri");
        let client = rowgate::backend::postgres::connect_without_tls(&cfg).await.expect("connect");
        client.batch_execute(statements).await.unwrap_or_else(|e| {
            let said = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
            panic!("{statements}: {e} {said}")
        });
    });
}

/// Stops `child` (a server the tests started) when this test process exits, however it exits
/// (static values are never dropped), then runs `after` (shell); reaps it meanwhile.
pub fn stop_child_with_this_process(child: std::process::Child, after: &str) {
    let watchdog = format!(
        "while kill -0 {} 2>/dev/null; do sleep 1; done; kill {}; {after}",
        std::process::id(),
        child.id()
    );
    let _ = std::process::Command::new("sh")
        .args(["-c", &watchdog])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = child;
    std::thread::spawn(move || child.wait());
}

/// Stops the cluster when the test process exits, even if it is killed or panics: static
/// values are never dropped, so a watchdog process does it.
pub fn stop_with_this_process(cluster: &TempCluster) {
    let pid = std::process::id();
    let data = cluster.dir().join("data");
    let pg_ctl = cluster.program("pg_ctl");
    let stop = format!("{} -D {} -m immediate stop", pg_ctl.display(), data.display());
    let stop = if rowgate::cluster::is_root() { format!("runuser -u postgres -- {stop}") } else { stop };
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {}",
        cluster.dir().display()
    );
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// Runs a page test of `tests/js` (a script driving Debian's headless chromium through
/// puppeteer-core) with `env`; what it printed, as JSON. Missing parts fail loudly.
pub fn page_test(script: &str, env: &[(&str, &str)]) -> serde_json::Value {
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        js.join("node_modules/puppeteer-core").is_dir(),
        "puppeteer-core is not installed: run `npm ci` in tests/js (scripts/test does)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "chromium is not installed at {chromium}: scripts/prereqs installs Debian's"
    );
    let out = std::process::Command::new("node")
        .arg(script)
        .current_dir(&js)
        .envs(env.iter().copied())
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node is needed for the browser tests");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the page test {script} failed:\n{report}");
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect(&report)
}

pub mod oidc;
pub mod pgbouncer;
pub mod receiver;
pub mod replica;
pub mod s3;
pub mod smtp;
pub mod twin;

/// A response: status, headers, body.
#[derive(Debug)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// Body text.
    pub body: String,
}

impl Resp {
    /// A header's value, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}

/// Sends a request to `base` and returns the whole response.
pub fn request_to(base: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    send_to(base, method, path, headers, None)
}

/// Sends a request with an optional body to `base` and returns the whole response.
pub fn send_to(base: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
    static CLIENT: OnceLock<reqwest::blocking::Client> = OnceLock::new();
    let client = CLIENT.get_or_init(|| reqwest::blocking::Client::builder().build().expect("client"));
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = client.request(method, format!("{base}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(body) = body {
        req = req.body(body.to_owned());
    }
    let r = req.send().unwrap_or_else(|e| panic!("request {path} failed: {e}"));
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.text().unwrap_or_default();
    Resp { status, headers, body }
}

/// Sends `head` (a request's head, without its final empty line, then `body`) as it is on one
/// connection, as curl would send a URL it does not encode; returns each response's status
/// and body, in order.
pub fn send_raw(base: &str, requests: &[(&str, &str)]) -> Vec<(u16, String)> {
    use std::io::{BufRead, BufReader, Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut sent = Vec::new();
    for (head, body) in requests {
        sent.extend_from_slice(format!("{head}\r\nHost: {addr}\r\n").as_bytes());
        if !body.is_empty() {
            sent.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        sent.extend_from_slice(format!("\r\n{body}").as_bytes());
    }
    stream.write_all(&sent).expect("send");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut responses = Vec::new();
    for _ in requests {
        line.clear();
        reader.read_line(&mut line).expect("status line");
        let status: u16 = line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        let (mut length, mut chunked) = (0usize, false);
        loop {
            line.clear();
            reader.read_line(&mut line).expect("header");
            let l = line.trim_end().to_ascii_lowercase();
            if l.is_empty() {
                break;
            }
            if let Some(v) = l.strip_prefix("content-length:") {
                length = v.trim().parse().expect("length");
            }
            chunked |= l == "transfer-encoding: chunked";
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                reader.read_line(&mut line).expect("chunk size");
                let size = usize::from_str_radix(line.trim(), 16).expect("chunk size");
                let mut chunk = vec![0; size + 2];
                reader.read_exact(&mut chunk).expect("chunk");
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length, 0);
            reader.read_exact(&mut body).expect("body");
        }
        responses.push((status, String::from_utf8(body).expect("utf-8 body")));
    }
    responses
}

/// The status line of a GET of `path` on `base`, as it travels (with its reason phrase).
pub fn status_line(base: &str, path: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").expect("send");
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).expect("status line");
    line.trim_end().to_owned()
}

/// Sends a request to the default server (or, inside `on_both!`'s SQLite run, its twin).
pub fn request(method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    request_to(twin::target(&harness().base), method, path, headers)
}

/// A write with a JSON body on the default server (or its twin).
pub fn write(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    send_to(twin::target(&harness().base), method, path, &all, Some(body))
}

/// GET on the default server.
pub fn get(path: &str) -> Resp {
    request("GET", path, &[])
}

/// Checks one request's status and JSON body against the expected ones.
#[track_caller]
pub fn check(path: &str, status: u16, body: serde_json::Value) -> Resp {
    let r = get(path);
    assert_eq!(r.status, status, "GET {path}: {}", r.body);
    assert_eq!(r.json(), body, "GET {path}");
    r
}
