//! Static files (`static-dir`) beside the API, as PocketBase's `pb_public`.

use std::sync::OnceLock;

use crate::support::{request_to, start_server};

/// The directory served.
fn dir() -> &'static std::path::Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir").keep())
}

/// A server with a directory of files at `/` and the API (on an in-memory SQLite) at `/api`.
fn base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = dir().to_owned();
        std::fs::write(dir.join("index.html"), "<h1>home</h1>").unwrap();
        std::fs::create_dir(dir.join("assets")).unwrap();
        std::fs::write(dir.join("assets/app.js"), "console.log(1);").unwrap();
        std::fs::write(dir.join("data.bin"), b"0123456789").unwrap();
        start_server(rowgate::config::ServeArgs {
            db_uri: Some("sqlite::memory:".into()),
            db_anon_role: Some("anon".into()),
            static_dir: Some(dir),
            server_host: Some("127.0.0.1".into()),
            ..Default::default()
        })
    })
}

#[test]
fn files_are_served_with_their_type_and_a_directory_with_its_index() {
    let r = request_to(base(), "GET", "/", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "<h1>home</h1>"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let r = request_to(base(), "GET", "/assets/app.js", &[]);
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/javascript; charset=utf-8")));
    assert_eq!(request_to(base(), "GET", "/missing.txt", &[]).status, 404);
    // Never outside the directory.
    assert_eq!(request_to(base(), "GET", "/assets/..%2f..%2f..%2fetc/passwd", &[]).status, 404);
    assert_eq!(request_to(base(), "POST", "/index.html", &[]).status, 405);
}

#[test]
fn etags_revalidate_and_ranges_answer_206() {
    let r = request_to(base(), "GET", "/data.bin", &[]);
    let etag = r.header("etag").expect("an ETag").to_owned();
    let r = request_to(base(), "GET", "/data.bin", &[("if-none-match", &etag)]);
    assert_eq!((r.status, r.body.as_str()), (304, ""));
    let r = request_to(base(), "GET", "/data.bin", &[("range", "bytes=2-4")]);
    assert_eq!((r.status, r.body.as_str(), r.header("content-range")), (206, "234", Some("bytes 2-4/10")));
    let r = request_to(base(), "GET", "/data.bin", &[("range", "bytes=-3")]);
    assert_eq!((r.status, r.body.as_str()), (206, "789"));
    let r = request_to(base(), "GET", "/data.bin", &[("range", "bytes=20-")]);
    assert_eq!((r.status, r.header("content-range")), (416, Some("bytes */10")));
    // A range for another version of the file: the whole file.
    let r = request_to(base(), "GET", "/data.bin", &[("range", "bytes=2-4"), ("if-range", "\"other\"")]);
    assert_eq!((r.status, r.body.as_str()), (200, "0123456789"));
}

#[test]
fn the_api_lives_under_its_prefix() {
    let r = request_to(base(), "GET", "/api/nothing_here", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["code"], "PGRST205", "{}", r.body);
    assert_eq!(request_to(base(), "GET", "/live", &[]).status, 200);
}

#[test]
fn files_and_api_that_would_shadow_each_other_stop_start_up() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("api")).unwrap();
    let args = |api: Option<&str>, prefix: Option<&str>| rowgate::config::ServeArgs {
        db_uri: Some("sqlite::memory:".into()),
        static_dir: Some(dir.path().to_owned()),
        api_prefix: api.map(String::from),
        static_prefix: prefix.map(String::from),
        ..Default::default()
    };
    let err = |a| rowgate::config::Config::load(&a).unwrap_err().to_string();
    assert!(err(args(None, None)).contains("would shadow"));
    assert!(err(args(Some("/"), None)).contains("would shadow"));
    assert!(err(args(Some("/v1"), Some("/v1/files"))).contains("would shadow"));
    assert!(rowgate::config::Config::load(&args(Some("/v1"), None)).is_ok());
    assert!(rowgate::config::Config::load(&args(Some("/rest"), Some("/files"))).is_ok());
}

#[test]
fn a_file_changed_on_disk_is_served_as_changed_within_a_second() {
    let base = base();
    std::fs::write(dir().join("news.txt"), "old").unwrap();
    assert_eq!(request_to(base, "GET", "/news.txt", &[]).body, "old");
    std::fs::write(dir().join("news.txt"), "newer").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(request_to(base, "GET", "/news.txt", &[]).body, "newer");
}

#[test]
fn the_directory_never_serves_the_database_its_rules_its_config_dotfiles_or_what_links_lead_out_to() {
    // `--static-dir .` beside the database: each of these was served before.
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let outside = tempfile::tempdir().expect("temp dir").keep();
    std::fs::write(outside.join("secret.txt"), "outside").unwrap();
    std::fs::write(dir.join("index.html"), "home").unwrap();
    std::fs::write(dir.join(".env"), "SECRET=1").unwrap();
    std::fs::create_dir_all(dir.join(".well-known")).unwrap();
    std::fs::write(dir.join(".well-known/security.txt"), "Contact: x").unwrap();
    std::fs::write(dir.join("rules.toml"), "[notes]\nselect = { anon = \"true\" }\n").unwrap();
    std::fs::write(dir.join("rowgate.toml"), "log-level = \"error\"\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), dir.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(dir.join("index.html"), dir.join("home.html")).unwrap();
    rusqlite::Connection::open(dir.join("app.db"))
        .unwrap()
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY)")
        .unwrap();
    let base = start_server(rowgate::config::ServeArgs {
        config: Some(dir.join("rowgate.toml")),
        db_uri: Some(format!("sqlite:{}", dir.join("app.db").display())),
        db_anon_role: Some("anon".into()),
        db_rules: Some(dir.join("rules.toml")),
        static_dir: Some(dir.clone()),
        server_host: Some("127.0.0.1".into()),
        ..Default::default()
    });
    // The database is open in WAL mode: its log and shared memory files exist now.
    assert_eq!(request_to(&base, "GET", "/api/notes", &[]).body, "[]");
    assert!(dir.join("app.db-wal").exists());
    for path in [
        "/app.db",
        "/app.db-wal",
        "/app.db-shm",
        "/app.db-journal",
        "/rules.toml",
        "/rowgate.toml",
        "/.env",
        "/%2eenv",
        "//.env",
        "/link.txt",
    ] {
        assert_eq!(request_to(&base, "GET", path, &[]).status, 404, "{path}");
    }
    assert_eq!(request_to(&base, "GET", "/.well-known/security.txt", &[]).body, "Contact: x");
    // A link that stays inside the directory is served.
    assert_eq!(request_to(&base, "GET", "/home.html", &[]).body, "home");
    for same in ["/index.html", "//index.html", "///index.html", "/%69ndex.html"] {
        assert_eq!(request_to(&base, "GET", same, &[]).body, "home", "{same}");
    }
}

#[test]
fn storage_s_files_and_configuration_files_are_never_served_from_the_directory() {
    // `--static-dir .` with storage's default `storage-dir` under it, and configuration files
    // this server did not read.
    let dir = tempfile::tempdir().expect("temp dir").keep();
    std::fs::create_dir_all(dir.join("old")).unwrap();
    std::fs::write(dir.join("old/rowgate.toml"), "jwt-secret = \"a secret\"\n").unwrap();
    std::fs::write(dir.join("postgrest.conf"), "jwt-secret = \"a secret\"\n").unwrap();
    let base = crate::sqlite::serve_sqlite(
        &dir.join("app.db"),
        "CREATE TABLE notes (id INTEGER PRIMARY KEY)",
        crate::storage::RULES,
        rowgate::config::ServeArgs {
            storage_enabled: Some(true),
            storage_dir: Some(dir.join("storage")),
            static_dir: Some(dir.clone()),
            ..Default::default()
        },
    );
    let service = crate::storage::token(serde_json::json!({"role": "service_role"}));
    let (status, _) =
        crate::storage::call_on(&base, "POST", "/bucket", Some(&service), Some(r#"{"name": "private"}"#));
    assert_eq!(status, 200);
    let (status, _) = crate::storage::call_on(
        &base,
        "POST",
        "/object/private/secret.json",
        Some(&service),
        Some(r#"{"s": 1}"#),
    );
    assert_eq!(status, 200);
    let stored = crate::storage::files_in(&dir.join("storage"));
    assert_eq!(stored.len(), 1, "{stored:?}");
    let rel = stored[0].strip_prefix(&dir).unwrap().display().to_string();
    for path in [
        format!("/{rel}"),
        "/old/rowgate.toml".into(),
        "/postgrest.conf".into(),
        "/OLD/../old/ROWGATE.TOML".into(),
    ] {
        assert_eq!(request_to(&base, "GET", &path, &[]).status, 404, "{path}");
    }
}
