//! Backups of the SQLite default (docs/reliability.md): `rowgate backup` while the server takes
//! writes, uploads and deletes, `rowgate restore` into a fresh place, and the restored server
//! answering with every row acknowledged before the backup and every file its rows name; the
//! schedule keeping the newest `backup-keep`.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{send_to, JWT_SECRET};

const ROWGATE: &str = env!("CARGO_BIN_EXE_rowgate");

const SCHEMA: &str = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);";

fn rules() -> String {
    format!(
        "[notes]\nselect = {{ anon = \"true\" }}\ninsert = {{ anon = \"true\" }}\n{}",
        crate::storage::RULES
    )
}

fn service() -> String {
    crate::storage::token(json!({"role": "service_role"}))
}

fn call(base: &str, method: &str, path: &str, body: Option<&str>) -> crate::support::Resp {
    let auth = format!("Bearer {}", service());
    send_to(base, method, path, &[("authorization", &auth), ("content-type", "application/json")], body)
}

/// The options `rowgate serve` would get for the file at `db`, as the commands take them.
fn options(db: &Path) -> Vec<String> {
    let dir = db.parent().expect("folder");
    [
        "--db-uri",
        &format!("sqlite:{}", db.display()),
        "--db-rules",
        &db.with_extension("rules.toml").display().to_string(),
        "--storage-enabled",
        "true",
        "--storage-dir",
        &dir.join("files").display().to_string(),
        "--jwt-secret",
        JWT_SECRET,
    ]
    .map(str::to_owned)
    .to_vec()
}

fn rowgate(args: &[&str], options: &[String]) -> (bool, String) {
    let out = Command::new(ROWGATE).args(args).args(options).output().expect("run rowgate");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn serve(db: &Path, args: rowgate::config::ServeArgs) -> String {
    crate::sqlite::serve_sqlite(
        db,
        SCHEMA,
        &rules(),
        rowgate::config::ServeArgs {
            storage_enabled: Some(true),
            storage_dir: Some(db.parent().expect("folder").join("files")),
            ..args
        },
    )
}

#[test]
fn a_backup_taken_under_writes_restores_every_acknowledged_row_and_file() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let base = serve(&db, Default::default());
    assert_eq!(call(&base, "POST", "/storage/v1/bucket", Some(r#"{"name": "files"}"#)).status, 200);

    // One client writes rows and another uploads (and deletes every other upload) all along.
    let (stop, acked) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let writer = {
        let (base, stop, acked) = (base.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let n = acked.load(Ordering::SeqCst) + 1;
                let r = call(
                    &base,
                    "POST",
                    "/notes",
                    Some(&json!({"id": n, "body": format!("note {n}")}).to_string()),
                );
                assert_eq!(r.status, 201, "{}", r.body);
                acked.store(n, Ordering::SeqCst);
            }
        })
    };
    let uploader = {
        let (base, stop) = (base.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let r = call(
                    &base,
                    "POST",
                    &format!("/storage/v1/object/files/{i}.txt"),
                    Some(&format!("file {i}")),
                );
                assert_eq!(r.status, 200, "{}", r.body);
                if i % 2 == 0 {
                    let r = call(&base, "DELETE", &format!("/storage/v1/object/files/{}.txt", i - 1), None);
                    assert_eq!(r.status, 200, "{}", r.body);
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let before = acked.load(Ordering::SeqCst);
    let archive = dir.path().join("app.tar.gz");
    let (ok, said) = rowgate(&["backup", "--out", &archive.display().to_string()], &options(&db));
    assert!(ok, "{said}");
    assert!(said.contains("stored files"), "{said}");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    writer.join().expect("writer");
    uploader.join().expect("uploader");

    // A restore needs the file to be free, or --force for one that is not in use.
    let (ok, said) = rowgate(&["restore", &archive.display().to_string()], &options(&db));
    assert!(!ok && said.contains("exists: --force replaces it"), "{said}");
    let (ok, said) = rowgate(&["restore", "--force", &archive.display().to_string()], &options(&db));
    assert!(!ok && said.contains("is in use: stop the server first"), "{said}");

    let elsewhere = tempfile::tempdir().expect("dir");
    let restored = elsewhere.path().join("app.db");
    let started = Instant::now();
    let (ok, said) = rowgate(&["restore", &archive.display().to_string()], &options(&restored));
    assert!(ok, "{said}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(restored.with_extension("rules.toml").is_file(), "the rules come back too");

    let base = crate::support::start_server(rowgate::config::ServeArgs {
        db_uri: Some(format!("sqlite:{}", restored.display())),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        jwt_secret: Some(JWT_SECRET.into()),
        storage_enabled: Some(true),
        storage_dir: Some(elsewhere.path().join("files")),
        ..Default::default()
    });
    // Every row acknowledged before the backup began, and no gap: the copy is one moment's.
    let ids: Vec<u64> = call(&base, "GET", "/notes?select=id&order=id", None)
        .json()
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_u64().expect("id"))
        .collect();
    assert!(ids.len() as u64 >= before, "{} rows restored, {before} acknowledged before", ids.len());
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    // Every object the restored rows name has its bytes.
    let listed =
        call(&base, "POST", "/storage/v1/object/list/files", Some(r#"{"prefix": "", "limit": 1000}"#));
    let names: Vec<String> = listed
        .json()
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!names.is_empty());
    for name in names {
        let r = call(&base, "GET", &format!("/storage/v1/object/files/{name}"), None);
        assert_eq!((r.status, r.body), (200, format!("file {}", name.trim_end_matches(".txt"))), "{name}");
    }
}

#[test]
fn the_schedule_takes_backups_and_keeps_the_newest() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let backups = dir.path().join("kept");
    let base = serve(
        &db,
        rowgate::config::ServeArgs {
            backup_schedule: Some("* * * * * *".into()),
            backup_keep: Some(2),
            backup_dir: Some(backups.clone()),
            ..Default::default()
        },
    );
    assert_eq!(call(&base, "POST", "/notes", Some(r#"{"body": "kept"}"#)).status, 201);
    std::thread::sleep(Duration::from_millis(3500));
    let names: Vec<String> = std::fs::read_dir(&backups)
        .expect("backup-dir")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("rowgate-") && n.ends_with(".tar.gz")), "{names:?}");
}

#[test]
fn backups_are_of_sqlite_files_only() {
    let (ok, said) = rowgate(&["backup"], &["--db-uri".into(), "postgres://localhost/app".into()]);
    assert!(!ok && said.contains("PostgreSQL is backed up with pg_basebackup"), "{said}");
    let (ok, said) = rowgate(
        &["serve"],
        &[
            "--db-uri".into(),
            "postgres://localhost/app".into(),
            "--backup-schedule".into(),
            "0 3 * * *".into(),
        ],
    );
    assert!(!ok && said.contains("backup-schedule"), "{said}");
    let (ok, said) = rowgate(&["serve"], &["--backup-schedule".into(), "at three".into()]);
    assert!(!ok && said.contains("is not a cron expression"), "{said}");
}

/// Litestream as users run it beside the file (docs/reliability.md): the binary npm ships.
const LITESTREAM: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js/node_modules/@flydotio/litestream-linux-x64/litestream");

fn litestream(args: &[&str]) -> String {
    let out = Command::new(LITESTREAM).args(args).output().expect("run litestream");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "litestream {args:?}: {text}");
    text
}

fn count(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open the restored file");
    conn.query_row("SELECT count(*) FROM notes", [], |r| r.get(0)).expect("count")
}

#[test]
fn litestream_replicates_the_served_file_and_restores_it_to_a_point_in_time() {
    assert!(Path::new(LITESTREAM).is_file(), "Litestream is missing: cd tests/js && npm ci");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let base = serve(&db, Default::default());
    let replica = format!("file://{}", dir.path().join("replica").display());
    let child = Command::new(LITESTREAM)
        .args(["replicate", &db.display().to_string(), &replica])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start litestream");
    crate::support::stop_child_with_this_process(child, "true");
    let insert = |from: i64, to: i64| {
        for id in from..=to {
            let r = call(&base, "POST", "/notes", Some(&json!({"id": id, "body": "x"}).to_string()));
            assert_eq!(r.status, 201, "{}", r.body);
        }
    };
    insert(1, 20);
    // Litestream copies the log every second.
    std::thread::sleep(Duration::from_millis(2500));
    let between = rowgate::storage::time::iso(std::time::SystemTime::now());
    std::thread::sleep(Duration::from_millis(1500));
    insert(21, 40);
    std::thread::sleep(Duration::from_millis(2500));

    let then = dir.path().join("then.db");
    litestream(&["restore", "-o", &then.display().to_string(), "-timestamp", &between, &replica]);
    assert_eq!(count(&then), 20, "restored as it was at {between}");
    let latest = dir.path().join("latest.db");
    litestream(&["restore", "-o", &latest.display().to_string(), &replica]);
    assert_eq!(count(&latest), 40);
}

#[test]
fn scheduled_backups_go_to_an_s3_bucket_too_keeping_the_newest() {
    let bucket = crate::support::s3::bucket(&format!("backups-{}", std::process::id()));
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    // The bucket's endpoint and keys are storage's options; storage itself keeps its files on disk.
    let s3 = crate::support::s3::args(&bucket, "unused", Default::default());
    let base = serve(
        &db,
        rowgate::config::ServeArgs {
            backup_schedule: Some("* * * * * *".into()),
            backup_keep: Some(2),
            backup_s3_url: Some(format!("s3://{bucket}/nightly")),
            storage_s3_endpoint: s3.storage_s3_endpoint,
            storage_s3_region: s3.storage_s3_region,
            storage_s3_access_key_id: s3.storage_s3_access_key_id,
            storage_s3_secret_access_key: s3.storage_s3_secret_access_key,
            ..Default::default()
        },
    );
    assert_eq!(call(&base, "POST", "/notes", Some(r#"{"body": "kept"}"#)).status, 201);
    // A backup is uploaded before the oldest is removed, so between the two the bucket holds one
    // more than `backup-keep`: watch it until more backups than that have come and gone.
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let keys = crate::support::s3::keys(&bucket, "nightly/");
        assert!(keys.len() <= 3, "{keys:?}");
        assert!(keys.iter().all(|k| k.starts_with("nightly/rowgate-") && k.ends_with(".tar.gz")), "{keys:?}");
        seen.extend(keys.iter().cloned());
        if keys.len() == 2 && seen.len() >= 4 {
            break;
        }
        assert!(Instant::now() < deadline, "still {keys:?} after {seen:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
