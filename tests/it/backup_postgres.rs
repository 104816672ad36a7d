//! PostgreSQL's backups as docs/reliability.md writes them down: a base backup
//! (`pg_basebackup`), the WAL archived by `archive_command`, storage's files copied without
//! deletions — and a restore to a point in time from them, served by rowgate with every row and
//! file of that moment.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rowgate::cluster::TempCluster;
use serde_json::json;

use crate::support::{block_on, send_to, start_server, stop_with_this_process, JWT_SECRET};

/// Runs a PostgreSQL program as the `postgres` user (when the tests run as root, as in CI).
fn as_postgres(program: PathBuf, args: &[&str]) {
    let mut cmd = match rowgate::cluster::is_root() {
        true => {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        }
        false => Command::new(program),
    };
    let out = cmd.args(args).output().expect("run a PostgreSQL program");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn sh(script: &str) {
    let out = Command::new("sh").args(["-c", script]).output().expect("sh");
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
}

fn server(cluster: &TempCluster, files: &Path) -> String {
    start_server(rowgate::config::ServeArgs {
        db_uri: Some(format!("postgres://authenticator@127.0.0.1:{}/postgres", cluster.port())),
        db_schemas: Some("public".into()),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        jwt_secret: Some(JWT_SECRET.into()),
        storage_enabled: Some(true),
        storage_dir: Some(files.to_owned()),
        ..Default::default()
    })
}

fn call(base: &str, method: &str, path: &str, body: Option<&str>) -> crate::support::Resp {
    let auth = format!("Bearer {}", crate::storage::token(json!({"role": "service_role"})));
    send_to(base, method, path, &[("authorization", &auth), ("content-type", "application/json")], body)
}

fn now_in(cluster: &TempCluster) -> String {
    crate::support::replica::value(&cluster.uri("postgres", "postgres"), "SELECT clock_timestamp()::text")
}

#[test]
fn a_base_backup_and_the_wal_archive_restore_rows_and_files_to_a_point_in_time() {
    let dir = tempfile::tempdir().expect("dir").keep();
    let wal = dir.join("wal");
    std::fs::create_dir_all(&wal).expect("wal archive");
    if rowgate::cluster::is_root() {
        sh(&format!("chown postgres {}", wal.display()));
    }
    let archive = format!("archive_command='test ! -f {0}/%f && cp %p {0}/%f'", wal.display());
    let primary = TempCluster::start_in(&dir.join("primary"), &["archive_mode=on".into(), archive])
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"));
    stop_with_this_process(&primary);
    let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["install", "--db-uri", &primary.uri("postgres", "postgres")])
        .output()
        .expect("rowgate install");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    block_on(primary.run_sql(
        "postgres",
        "CREATE TABLE public.notes (id int PRIMARY KEY, body text NOT NULL); GRANT ALL ON public.notes TO service_role;",
    ))
    .expect("schema");
    let files = dir.join("files");
    let base = server(&primary, &files);
    assert_eq!(call(&base, "POST", "/storage/v1/bucket", Some(r#"{"name": "docs"}"#)).status, 200);
    assert_eq!(
        call(&base, "POST", "/notes", Some(r#"{"id": 1, "body": "before the base backup"}"#)).status,
        201
    );
    assert_eq!(call(&base, "POST", "/storage/v1/object/docs/a.txt", Some("file a")).status, 200);

    // The base backup, then more writes, then storage's files copied (never deleting).
    let basebackup = dir.join("base");
    let port = primary.port().to_string();
    let target = basebackup.display().to_string();
    if rowgate::cluster::is_root() {
        sh(&format!("mkdir -p {target} && chown postgres {target}"));
    }
    as_postgres(
        primary.program("pg_basebackup"),
        &["-D", &target, "-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-X", "stream", "-c", "fast"],
    );
    assert_eq!(call(&base, "POST", "/notes", Some(r#"{"id": 2, "body": "after it"}"#)).status, 201);
    assert_eq!(call(&base, "POST", "/storage/v1/object/docs/b.txt", Some("file b")).status, 200);
    let copy = dir.join("files-copy");
    sh(&format!("cp -a {}/. {}", files.display(), copy.display()));
    std::thread::sleep(Duration::from_millis(300));
    let moment = now_in(&primary);
    std::thread::sleep(Duration::from_millis(300));
    // After the moment restored to: a row, and a file removed.
    assert_eq!(call(&base, "POST", "/notes", Some(r#"{"id": 3, "body": "too late"}"#)).status, 201);
    assert_eq!(call(&base, "DELETE", "/storage/v1/object/docs/a.txt", None).status, 200);
    block_on(primary.run_sql("postgres", "SELECT pg_switch_wal()")).expect("archive the last segment");
    std::thread::sleep(Duration::from_millis(1000));
    primary.stop().expect("the primary is lost");

    // The restore: the base backup, recovery from the archive up to the moment, promoted.
    let restored = dir.join("restored");
    sh(&format!(
        "mkdir -p {0} && cp -a {1} {0}/data && chmod 700 {0}/data",
        restored.display(),
        basebackup.display()
    ));
    let data = restored.join("data");
    std::fs::write(data.join("recovery.signal"), "").expect("recovery.signal");
    let settings = format!(
        "restore_command = 'cp {}/%f %p'\nrecovery_target_time = '{moment}'\nrecovery_target_action = 'promote'\n",
        wal.display()
    );
    let auto = data.join("postgresql.auto.conf");
    let mut conf = std::fs::read_to_string(&auto).unwrap_or_default();
    conf.push_str(&settings);
    std::fs::write(&auto, conf).expect("recovery settings");
    let cluster =
        TempCluster::start_in(&restored, &[]).unwrap_or_else(|e| panic!("the restore did not start: {e}"));
    stop_with_this_process(&cluster);
    let started = std::time::Instant::now();
    while crate::support::replica::value(&cluster.uri("postgres", "postgres"), "SELECT pg_is_in_recovery()")
        != "f"
    {
        assert!(started.elapsed() < Duration::from_secs(60), "recovery did not end");
        std::thread::sleep(Duration::from_millis(100));
    }

    let base = server(&cluster, &copy);
    let rows = call(&base, "GET", "/notes?select=id&order=id", None).json();
    assert_eq!(rows, json!([{"id": 1}, {"id": 2}]), "as at {moment}");
    for (name, bytes) in [("a.txt", "file a"), ("b.txt", "file b")] {
        let r = call(&base, "GET", &format!("/storage/v1/object/docs/{name}"), None);
        assert_eq!((r.status, r.body.as_str()), (200, bytes), "{name}");
    }
}
