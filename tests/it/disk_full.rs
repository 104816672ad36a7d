//! A full disk (docs/reliability.md): writes and uploads are answered 503 with `Retry-After`
//! and a code of their surface's shape, deletes still run, the write-ahead log is cut back, and
//! writes resume without a restart once there is room. Each disk is a tmpfs of its own,
//! mounted by the test (which needs root, as in CI; a missing mount fails loudly).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{default_args, harness, send_to, sql, start_server};

/// A tmpfs of a fixed size, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(megabytes: u64) -> SmallDisk {
        let dir = tempfile::tempdir().expect("temp dir").keep();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("run mount");
        assert!(mounted.success(), "mounting a tmpfs for the full-disk tests needs root (CAP_SYS_ADMIN)");
        SmallDisk { dir }
    }

    /// Fills what is left of the disk with one file; removing it makes room again.
    fn fill(&self) -> PathBuf {
        let path = self.dir.join("filler");
        let mut file = std::fs::File::create(&path).expect("filler");
        let block = vec![7u8; 64 * 1024];
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        // What is left is smaller than a block: fill it byte by byte's worth.
        let mut small = vec![7u8; 4096];
        while file.write(&small).is_ok_and(|n| n > 0) {}
        small.truncate(1);
        while file.write(&small).is_ok_and(|n| n > 0) {}
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn call(base: &str, method: &str, path: &str, token: &str, body: Option<&str>) -> crate::support::Resp {
    let auth = format!("Bearer {token}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    send_to(base, method, path, &headers, body)
}

/// Text of `n` bytes no compression shrinks much.
fn noise(n: usize, seed: u64) -> String {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

fn metric(base: &str, name: &str) -> f64 {
    let text = send_to(base, "GET", "/rowgate/metrics", &[], None).body;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /rowgate/metrics"))
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[test]
fn sqlite_on_a_full_disk_refuses_writes_runs_deletes_and_resumes_without_a_restart() {
    let disk = SmallDisk::mount(64);
    let db = disk.dir.join("app.db");
    let rules = format!(
        "[notes]\nselect = {{ anon = \"true\" }}\ninsert = {{ anon = \"true\" }}\ndelete = {{ anon = \"true\" }}\n{}",
        crate::storage::RULES
    );
    let base = crate::sqlite::serve_sqlite(
        &db,
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
        &rules,
        rowgate::config::ServeArgs {
            storage_enabled: Some(true),
            storage_dir: Some(disk.dir.join("files")),
            accounts_enabled: Some(true),
            ..Default::default()
        },
    );
    let service = crate::storage::token(json!({"role": "service_role"}));
    for i in 0..10 {
        let body = json!({"body": noise(200_000, i)}).to_string();
        assert_eq!(call(&base, "POST", "/notes", &service, Some(&body)).status, 201);
    }
    let bucket = json!({"name": "files"}).to_string();
    assert_eq!(call(&base, "POST", "/storage/v1/bucket", &service, Some(&bucket)).status, 200);
    let upload = |name: &str| {
        call(&base, "POST", &format!("/storage/v1/object/files/{name}"), &service, Some(&noise(100_000, 99)))
    };
    assert_eq!(upload("kept.txt").status, 200);

    let filler = disk.fill();
    // Writes that still fit in the log's room go through; the first that does not is refused.
    let refused = (100..300)
        .map(|i| {
            call(&base, "POST", "/notes", &service, Some(&json!({"body": noise(100_000, i)}).to_string()))
        })
        .find(|r| r.status != 201)
        .expect("a write refused once the disk is full");
    let expected = json!({
        "code": "RG008",
        "details": null,
        "hint": "Writes resume once there is room again; deletes still work.",
        "message": "The disk under the SQLite file is full",
    });
    assert_eq!(
        (refused.status, refused.header("retry-after"), refused.json()),
        (503, Some("30"), expected.clone())
    );
    // Refused at once from now on, on every surface, while reads go on.
    let again = call(&base, "POST", "/notes", &service, Some(r#"{"body": "short"}"#));
    assert_eq!((again.status, again.json()), (503, expected));
    let file = upload("new.txt");
    assert_eq!((file.status, file.header("retry-after")), (503, Some("30")), "{}", file.body);
    assert_eq!(
        file.json(),
        json!({"statusCode": "503", "code": "InsufficientStorage", "error": "Insufficient Storage",
               "message": "The disk is full: uploads resume once there is room again; deletes still work"})
    );
    let signup = json!({"email": "ann@example.com", "password": "correct horse"}).to_string();
    let user =
        send_to(&base, "POST", "/auth/v1/signup", &[("content-type", "application/json")], Some(&signup));
    assert_eq!(
        (user.status, user.json()["error_code"].clone()),
        (503, json!("insufficient_storage")),
        "{}",
        user.body
    );
    assert_eq!(call(&base, "GET", "/notes?select=id&limit=1", &service, None).status, 200);
    assert_eq!(metric(&base, "rowgate_sqlite_disk_full"), 1.0);
    assert!(metric(&base, "rowgate_disk_full_refusals_total") >= 4.0);

    // Deletes make room, and the log is checkpointed back to nothing after them.
    let deleted = call(&base, "DELETE", "/notes?id=lte.8", &service, None);
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let removed = call(&base, "DELETE", "/storage/v1/object/files/kept.txt", &service, None);
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert!(size(&db.with_extension("db-wal")) < 64 * 1024, "the log is cut back after a delete");

    // Room again: writes resume within a second or two, without a restart.
    std::fs::remove_file(filler).expect("remove the filler");
    let started = Instant::now();
    loop {
        let r = call(&base, "POST", "/notes", &service, Some(r#"{"body": "after"}"#));
        if r.status == 201 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "writes did not resume: {} {}", r.status, r.body);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(upload("new.txt").status, 200);
    assert_eq!(metric(&base, "rowgate_sqlite_disk_full"), 0.0);
    let rows = call(&base, "GET", "/notes?select=id&order=id", &service, None).json();
    assert_eq!(rows.as_array().map(|r| r.len() >= 3), Some(true), "{rows}");
    assert_eq!(rows[0], json!({"id": 9}), "the deleted rows are gone, the rest kept");
}

#[test]
fn postgresql_out_of_room_answers_503_with_retry_after() {
    harness();
    let disk = SmallDisk::mount(8);
    let id = std::process::id();
    let status = std::process::Command::new("chown").arg("postgres").arg(&disk.dir).status();
    assert!(status.is_ok_and(|s| s.success()), "the tablespace's folder is given to postgres");
    let table = format!("disk_full_{id}");
    sql(&format!("CREATE TABLESPACE tiny_{id} LOCATION '{}'", disk.dir.display()));
    sql(&format!(
        "CREATE TABLE test.{table} (id serial PRIMARY KEY, body text NOT NULL) TABLESPACE tiny_{id};
         ALTER TABLE test.{table} ALTER COLUMN body SET STORAGE EXTERNAL;
         GRANT SELECT, INSERT, DELETE ON test.{table} TO web_anon;
         GRANT USAGE ON SEQUENCE test.{table}_id_seq TO web_anon;
         CREATE TABLE test.{table}_old TABLESPACE tiny_{id} AS SELECT g AS n FROM generate_series(1, 50000) g;"
    ));
    let base = start_server(default_args(&harness().superuser_uri));
    let refused = (0..200)
        .map(|i| {
            let body = json!({"body": noise(200_000, i)}).to_string();
            send_to(&base, "POST", &format!("/{table}"), &[("content-type", "application/json")], Some(&body))
        })
        .find(|r| r.status != 201)
        .expect("an insert refused once the tablespace is full");
    let body: Value = refused.json();
    assert_eq!(
        (refused.status, refused.header("retry-after"), &body["code"]),
        (503, Some("30"), &json!("53100"))
    );
    assert!(body["message"].as_str().is_some_and(|m| m.starts_with("could not extend file")), "{body}");
    // Reads and deletes go on (PostgreSQL's log is elsewhere); once the operator makes room
    // (VACUUM and TRUNCATE need some themselves, for maps and metapages), inserts run again.
    assert_eq!(send_to(&base, "GET", &format!("/{table}?select=id&limit=1"), &[], None).status, 200);
    assert_eq!(send_to(&base, "DELETE", &format!("/{table}?id=gt.0"), &[], None).status, 204);
    sql(&format!("DROP TABLE test.{table}_old"));
    let body = json!({"body": "after"}).to_string();
    let again =
        send_to(&base, "POST", &format!("/{table}"), &[("content-type", "application/json")], Some(&body));
    assert_eq!(again.status, 201, "{}", again.body);
    assert!(metric(&base, "rowgate_disk_full_refusals_total") >= 1.0);
    sql(&format!("DROP TABLE test.{table}"));
    sql(&format!("DROP TABLESPACE tiny_{id}"));
}
