//! A crash (docs/reliability.md): the real binary killed with SIGKILL while clients write rows
//! and upload files, then started again on the same database: every acknowledged write and
//! upload is there and whole, and the restart is ready at once. On SQLite (with storage) and on
//! PostgreSQL.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{harness, send_to, sql, JWT_SECRET};

/// Starts the binary in `dir` with `args`; its base URL once the banner names it.
pub fn start(dir: &Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .arg("serve")
        .args(["--server-host", "127.0.0.1", "--server-port", "0", "--jwt-secret", JWT_SECRET])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rowgate");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let base = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("rowgate: serving ").and_then(|r| r.rsplit(" at ").next()).map(str::to_owned)
        })
        .expect("the banner says where rowgate serves");
    std::thread::spawn(move || lines.for_each(drop));
    let base = base.trim_end_matches('/').to_owned();
    crate::support::wait_ready(&base);
    (child, base)
}

fn service() -> String {
    format!("Bearer {}", crate::storage::token(json!({"role": "service_role"})))
}

/// What the clients had acknowledged when the server died.
#[derive(Default)]
struct Acked {
    rows: Vec<(i64, String)>,
    files: Vec<(String, String)>,
}

/// Writers (and, with `files`, uploaders) against `base` until it dies; what was acknowledged.
fn write_until_killed(base: &str, table: &str, first: i64, files: bool, child: &mut Child) -> Acked {
    // With files, as the service role (SQLite's storage); without, as the anonymous role.
    let auth = if files { service() } else { String::new() };
    let acked = Arc::new(Mutex::new(Acked::default()));
    let dead = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for w in 0..4i64 {
        let (base, table, acked, dead, auth) =
            (base.to_owned(), table.to_owned(), acked.clone(), dead.clone(), auth.clone());
        clients.push(std::thread::spawn(move || {
            let mut id = first + w;
            while !dead.load(Ordering::SeqCst) {
                let body = format!("{id}:{}", "x".repeat(1000));
                let row = json!({"id": id, "body": body}).to_string();
                let mut headers = vec![("content-type", "application/json")];
                if !auth.is_empty() {
                    headers.push(("authorization", auth.as_str()));
                }
                let sent = reqwest::blocking::Client::new()
                    .post(format!("{base}/{table}"))
                    .headers(reqwest_headers(&headers))
                    .body(row)
                    .send();
                match sent {
                    Ok(r) if r.status() == 201 => acked.lock().unwrap().rows.push((id, body)),
                    Ok(r) => assert!(r.status().is_server_error(), "a write answered {}", r.status()),
                    Err(_) => {}
                }
                id += 4;
            }
        }));
    }
    if files {
        for u in 0..2 {
            let (base, acked, dead) = (base.to_owned(), acked.clone(), dead.clone());
            clients.push(std::thread::spawn(move || {
                let auth = service();
                let mut i = 0;
                while !dead.load(Ordering::SeqCst) {
                    i += 1;
                    let (name, bytes) = (format!("{u}-{i}.txt"), format!("{u}-{i}:{}", "y".repeat(20_000)));
                    let sent = reqwest::blocking::Client::new()
                        .post(format!("{base}/storage/v1/object/files/{name}"))
                        .header("authorization", &auth)
                        .body(bytes.clone())
                        .send();
                    if sent.is_ok_and(|r| r.status() == 200) {
                        acked.lock().unwrap().files.push((name, bytes));
                    }
                }
            }));
        }
    }
    // Killed mid-writes once enough have been acknowledged to mean something — later on a
    // host busy with other tests — and never before a second and a half of writing.
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let enough = {
            let a = acked.lock().unwrap();
            a.rows.len() >= 60 && (!files || a.files.len() >= 6)
        };
        if started.elapsed() >= Duration::from_millis(1500)
            && (enough || started.elapsed() >= Duration::from_secs(30))
        {
            break;
        }
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    dead.store(true, Ordering::SeqCst);
    clients.into_iter().for_each(|c| c.join().expect("client"));
    Arc::try_unwrap(acked).ok().expect("clients done").into_inner().unwrap()
}

fn reqwest_headers(pairs: &[(&str, &str)]) -> reqwest::header::HeaderMap {
    pairs.iter().map(|(k, v)| (k.parse().expect("name"), v.parse().expect("value"))).collect()
}

/// Every acknowledged row and file is there and whole.
fn all_kept(base: &str, table: &str, acked: &Acked) {
    let auth = service();
    let headers: &[(&str, &str)] = if acked.files.is_empty() { &[] } else { &[("authorization", &auth)] };
    let rows = send_to(base, "GET", &format!("/{table}?select=id,body"), headers, None).json();
    let found: std::collections::HashMap<i64, String> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r["body"].as_str().unwrap().to_owned()))
        .collect();
    for (id, body) in &acked.rows {
        assert_eq!(found.get(id), Some(body), "acknowledged row {id}");
    }
    for (id, body) in &found {
        assert!(
            body.starts_with(&format!("{id}:")) && body.len() == format!("{id}:").len() + 1000,
            "a torn row {id}"
        );
    }
    for (name, bytes) in &acked.files {
        let r = send_to(
            base,
            "GET",
            &format!("/storage/v1/object/files/{name}"),
            &[("authorization", &auth)],
            None,
        );
        assert_eq!((r.status, &r.body), (200, bytes), "acknowledged upload {name}");
    }
}

#[test]
fn sqlite_with_storage_killed_under_writes_keeps_every_acknowledged_row_and_file() {
    let dir = tempfile::tempdir().expect("dir");
    rusqlite::Connection::open(dir.path().join("app.db"))
        .and_then(|c| c.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"))
        .expect("schema");
    let args = ["--db-uri", "sqlite:app.db", "--storage-enabled", "true"];
    let (mut child, mut base) = start(dir.path(), &args);
    let bucket = send_to(
        &base,
        "POST",
        "/storage/v1/bucket",
        &[("authorization", &service()), ("content-type", "application/json")],
        Some(r#"{"name": "files"}"#),
    );
    assert_eq!(bucket.status, 200, "{}", bucket.body);
    let mut acked = Acked::default();
    for round in 0..3 {
        let more = write_until_killed(&base, "notes", 1 + round * 1_000_000, true, &mut child);
        acked.rows.extend(more.rows);
        acked.files.extend(more.files);
        let restarted = Instant::now();
        (child, base) = start(dir.path(), &args);
        eprintln!("crash: SQLite ready {:?} after a kill -9", restarted.elapsed());
    }
    assert!(
        acked.rows.len() > 100 && acked.files.len() > 10,
        "{} rows, {} files",
        acked.rows.len(),
        acked.files.len()
    );
    all_kept(&base, "notes", &acked);
    // Files a kill left without a row wait for the daily sweep: a few per crash.
    let named = stored_versions(&dir.path().join("app.db"));
    let orphans =
        walk(&dir.path().join("storage/objects")).into_iter().filter(|v| !named.contains(v)).count();
    eprintln!(
        "crash: {} rows and {} files acknowledged, all kept; {orphans} files without a row after 3 kills",
        acked.rows.len(),
        acked.files.len()
    );
    assert!(orphans <= 3 * 4, "{orphans} orphan files");
    let _ = child.kill();
}

#[test]
fn sqlite_with_storage_in_s3_killed_under_uploads_keeps_every_acknowledged_file() {
    let bucket = crate::support::s3::bucket(&format!("crash-{}", std::process::id()));
    let dir = tempfile::tempdir().expect("dir");
    rusqlite::Connection::open(dir.path().join("app.db"))
        .and_then(|c| c.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"))
        .expect("schema");
    let endpoint = crate::support::s3::endpoint();
    let url = format!("s3://{bucket}/app");
    let args = [
        "--db-uri",
        "sqlite:app.db",
        "--storage-enabled",
        "true",
        "--storage-s3-url",
        &url,
        "--storage-s3-endpoint",
        endpoint,
        "--storage-s3-region",
        "us-east-1",
        "--storage-s3-access-key-id",
        "rowgate-test",
        "--storage-s3-secret-access-key",
        "rowgate-test-secret",
    ];
    let (mut child, mut base) = start(dir.path(), &args);
    let auth = service();
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    assert_eq!(
        send_to(&base, "POST", "/storage/v1/bucket", &headers, Some(r#"{"name": "files"}"#)).status,
        200
    );
    let mut acked = Acked::default();
    for round in 0..3 {
        let more = write_until_killed(&base, "notes", 1 + round * 1_000_000, true, &mut child);
        acked.rows.extend(more.rows);
        acked.files.extend(more.files);
        (child, base) = start(dir.path(), &args);
    }
    all_kept(&base, "notes", &acked);
    let named = stored_versions(&dir.path().join("app.db"));
    let keys = crate::support::s3::keys(&bucket, "app/objects/");
    let orphans = keys.iter().filter(|k| !named.contains(k.rsplit('/').next().unwrap_or_default())).count();
    let unfinished = crate::support::s3::unfinished_uploads(&bucket);
    eprintln!(
        "crash: S3: {} files acknowledged, all kept; {orphans} objects without a row and {unfinished} unfinished uploads after 3 kills",
        acked.files.len()
    );
    assert!(orphans <= 3 * 4, "{orphans} orphan objects");
    let _ = child.kill();
}

/// The versions of stored files the file's storage rows name.
fn stored_versions(db: &Path) -> std::collections::HashSet<String> {
    rusqlite::Connection::open(db)
        .and_then(|c| {
            let mut q = c.prepare("SELECT version FROM _rowgate_storage_objects")?;
            let v = q.query_map([], |r| r.get(0))?.collect::<Result<_, _>>();
            v
        })
        .expect("versions")
}

fn walk(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match entry.file_type().is_ok_and(|t| t.is_dir()) {
            true => names.extend(walk(&entry.path())),
            false => names.push(entry.file_name().to_string_lossy().into_owned()),
        }
    }
    names
}

#[test]
fn postgresql_served_by_a_killed_instance_keeps_every_acknowledged_write() {
    let h = harness();
    let table = format!("crash_{}", std::process::id());
    sql(&format!(
        "CREATE TABLE test.{table} (id bigint PRIMARY KEY, body text NOT NULL);
         GRANT ALL ON test.{table} TO web_anon;"
    ));
    let uri = crate::support::authenticator_uri(&h.superuser_uri);
    let dir = tempfile::tempdir().expect("dir");
    let args = ["--db-uri", &uri, "--db-schemas", "test", "--db-anon-role", "web_anon"];
    let (mut child, mut base) = start(dir.path(), &args);
    let mut acked = Acked::default();
    for round in 0..2 {
        acked.rows.extend(write_until_killed(&base, &table, 1 + round * 1_000_000, false, &mut child).rows);
        let restarted = Instant::now();
        (child, base) = start(dir.path(), &args);
        eprintln!("crash: PostgreSQL's instance ready {:?} after a kill -9", restarted.elapsed());
    }
    assert!(acked.rows.len() > 100, "{} rows", acked.rows.len());
    all_kept(&base, &table, &acked);
    let _ = child.kill();
    sql(&format!("DROP TABLE test.{table}"));
}
