//! Supabase Storage's API (`storage-enabled`) on PostgreSQL, installed by `rowgate storage
//! install` and guarded by the row-level security policies a Supabase project writes, and on
//! SQLite, guarded by the same rules written in the access rules file: the real
//! `@supabase/storage-js` client (tests/js/storage.test.mjs) on both, and requests by hand for
//! what the client does not show.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::support::{block_on, default_args, harness, send_to, sql, start_server, JWT_SECRET};

/// Two users' subs.
const ALICE: &str = "6f1d6c6e-1111-4c49-9c47-5e5d3b2a1a11";
const BOB: &str = "7e2d6c6e-2222-4c49-9c47-5e5d3b2a1a22";

pub(crate) fn token(claims: Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key).unwrap()
}

/// A server with storage on the test database: Supabase's roles, the install, and the policies
/// of the docs' "users own a folder named by their id" example.
fn base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        setup();
        serve(&tempfile::tempdir().unwrap().keep().join("storage"))
    })
}

/// A storage server on the test database, its bytes in `dir`.
pub(crate) fn serve(dir: &Path) -> String {
    start_server(rowgate::config::ServeArgs {
        storage_enabled: Some(true),
        storage_dir: Some(dir.to_owned()),
        db_anon_role: Some("anon".into()),
        ..default_args(&harness().superuser_uri)
    })
}

/// Supabase's roles, `rowgate storage install` and the policies, once.
pub(crate) fn setup() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        sql(r#"
            DO $$ BEGIN CREATE ROLE anon NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
            DO $$ BEGIN CREATE ROLE authenticated NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
            DO $$ BEGIN CREATE ROLE service_role NOLOGIN BYPASSRLS; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
            GRANT anon, authenticated, service_role TO "Authenticator";
        "#);
        let uri = harness().superuser_uri.clone();
        block_on(async move {
            let client = rowgate::backend::postgres::connect_without_tls(&uri.parse().unwrap()).await.unwrap();
            rowgate::backend::postgres::storage::install(&client, "Authenticator").await.expect("storage install");
            // Installing again changes nothing.
            rowgate::backend::postgres::storage::install(&client, "Authenticator").await.expect("install again");
        });
        sql(r#"
            DROP POLICY IF EXISTS "own folder read" ON storage.objects;
            DROP POLICY IF EXISTS "own folder write" ON storage.objects;
            DROP POLICY IF EXISTS "own folder update" ON storage.objects;
            DROP POLICY IF EXISTS "own folder delete" ON storage.objects;
            CREATE POLICY "own folder read" ON storage.objects FOR SELECT TO authenticated
              USING ((storage.foldername(name))[1] = auth.uid()::text);
            CREATE POLICY "own folder write" ON storage.objects FOR INSERT TO authenticated
              WITH CHECK ((storage.foldername(name))[1] = auth.uid()::text);
            CREATE POLICY "own folder update" ON storage.objects FOR UPDATE TO authenticated
              USING ((storage.foldername(name))[1] = auth.uid()::text);
            CREATE POLICY "own folder delete" ON storage.objects FOR DELETE TO authenticated
              USING ((storage.foldername(name))[1] = auth.uid()::text);
        "#);
    });
}

/// The PostgreSQL policies above, as access rules.
pub(crate) const RULES: &str = r#"
["storage.buckets"]
select = { service_role = "true" }
insert = { service_role = "true" }
update = { service_role = "true" }
delete = { service_role = "true" }
["storage.objects"]
select = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
insert = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
update = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
delete = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
"#;

/// A storage server on a fresh SQLite file with [`RULES`].
fn sqlite_base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let args = rowgate::config::ServeArgs {
            storage_enabled: Some(true),
            storage_dir: Some(dir.join("storage")),
            ..Default::default()
        };
        crate::sqlite::serve_sqlite(
            &dir.join("storage.db"),
            "CREATE TABLE notes (id INTEGER PRIMARY KEY);",
            RULES,
            args,
        )
    })
}

#[test]
fn storage_js_against_rowgate_on_postgres() {
    storage_js(base(), "disk");
}

#[test]
fn storage_js_against_rowgate_on_sqlite() {
    storage_js(sqlite_base(), "disk");
}

/// Runs tests/js/storage.test.mjs against `base`; `run` tells its buckets from those of other
/// runs on the same database.
pub(crate) fn storage_js(base: &str, run: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        dir.join("node_modules/@supabase/storage-js").is_dir(),
        "storage-js is not installed: run `npm ci` in tests/js (scripts/test does)"
    );
    let run = format!("{}-{run}", std::process::id());
    let out = Command::new("node")
        .args(["--test", "--test-reporter=spec", "storage.test.mjs"])
        .current_dir(&dir)
        .env("ROWGATE_STORAGE_URL", format!("{base}/storage/v1"))
        .env("SERVICE_TOKEN", token(json!({"role": "service_role"})))
        .env("ALICE_TOKEN", token(json!({"role": "authenticated", "sub": ALICE})))
        .env("BOB_TOKEN", token(json!({"role": "authenticated", "sub": BOB})))
        .env("ALICE_SUB", ALICE)
        .env("RUN_ID", run)
        .output()
        .expect("node is needed for the storage-js tests");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "storage-js tests failed:\n{report}");
}

/// `(status, JSON body)` of a storage request.
fn call(method: &str, path: &str, auth: Option<&str>, body: Option<&str>) -> (u16, Value) {
    call_on(base(), method, path, auth, body)
}

/// [`call`] on the server at `base`.
pub(crate) fn call_on(
    base: &str,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&str>,
) -> (u16, Value) {
    let bearer = auth.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(b) = &bearer {
        headers.push(("authorization", b));
    }
    let r = send_to(base, method, &format!("/storage/v1{path}"), &headers, body);
    let v = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, v)
}

#[test]
fn errors_have_supabase_storage_s_shape_on_postgres() {
    errors_have_supabase_storage_s_shape(base());
}

#[test]
fn errors_have_supabase_storage_s_shape_on_sqlite() {
    errors_have_supabase_storage_s_shape(sqlite_base());
}

fn errors_have_supabase_storage_s_shape(base: &str) {
    let call = |method: &str, path: &str, auth: Option<&str>, body: Option<&str>| {
        call_on(base, method, path, auth, body)
    };
    let service = token(json!({"role": "service_role"}));
    assert_eq!(
        call("GET", "/bucket/no-such-bucket", Some(&service), None),
        (
            400,
            json!({"statusCode": "404", "code": "NoSuchBucket", "error": "Bucket not found", "message": "Bucket not found"})
        )
    );
    assert_eq!(
        call("GET", "/bucket", Some("not-a-token"), None),
        (
            400,
            json!({"statusCode": "403", "code": "AccessDenied", "error": "Unauthorized", "message": "Invalid Compact JWS"})
        )
    );
    assert_eq!(
        call("GET", "/nowhere", Some(&service), None),
        (
            404,
            json!({"statusCode": "404", "code": "InvalidRequest", "error": "Not Found", "message": "Route GET:/nowhere not found"})
        )
    );
    assert_eq!(
        call("POST", "/bucket", Some(&service), Some(r#"{"name": "bad/name"}"#)),
        (
            400,
            json!({"statusCode": "400", "code": "InvalidBucketName", "error": "Invalid Input", "message": "Bucket name invalid"})
        )
    );
    // Without credentials, as Supabase's: its routes that run as someone require them.
    assert_eq!(
        call("POST", "/bucket", None, Some(r#"{"name": "anon-bucket"}"#)),
        (
            400,
            json!({"statusCode": "400", "code": "InvalidRequest", "error": "Error", "message": "headers must have required property 'authorization'"})
        )
    );
    // Anonymous callers have no policy here: they see no bucket and may create none.
    let anon = token(json!({"role": "anon"}));
    let (status, body) = call("POST", "/bucket", Some(&anon), Some(r#"{"name": "anon-bucket"}"#));
    assert_eq!((status, body["statusCode"].as_str()), (400, Some("403")), "{body}");
    // Transforms: a missing bucket, a parameter out of range, a source that is no image.
    assert_eq!(
        call("GET", "/render/image/public/no-such-bucket/a.png?width=10", None, None),
        (
            400,
            json!({"statusCode": "404", "code": "NoSuchBucket", "error": "Bucket not found", "message": "Bucket not found"})
        )
    );
    let bucket = format!("render-errors-{}", std::process::id());
    let created =
        call("POST", "/bucket", Some(&service), Some(&json!({"name": bucket, "public": true}).to_string()));
    assert_eq!(created.0, 200, "{}", created.1);
    assert_eq!(
        call("GET", &format!("/render/image/public/{bucket}/a.png?quality=5"), None, None),
        (
            400,
            json!({"statusCode": "400", "code": "InvalidRequest", "error": "Error", "message": "querystring/quality must be an integer between 20 and 100"})
        )
    );
    let uploaded =
        call("POST", &format!("/object/{bucket}/a.png"), Some(&service), Some(r#"{"not": "an image"}"#));
    assert_eq!(uploaded.0, 200, "{}", uploaded.1);
    assert_eq!(
        call("GET", &format!("/render/image/public/{bucket}/a.png?width=10"), None, None),
        (
            422,
            json!({"statusCode": "422", "code": "InvalidImage", "error": "ImageProcessingError", "message": "Invalid source image"})
        )
    );
}

/// The files under `dir`.
pub(crate) fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type().is_ok_and(|t| t.is_dir()) {
                true => dirs.push(e.path()),
                false => found.push(e.path()),
            }
        }
    }
    found
}

#[test]
fn an_interrupted_or_refused_upload_leaves_no_object_and_no_file() {
    use std::io::Write;
    setup();
    let dir = tempfile::tempdir().unwrap().keep().join("storage");
    let base = serve(&dir);
    let service = token(json!({"role": "service_role"}));
    let bucket = format!("cut-{}", std::process::id());
    let created = call(
        "POST",
        "/bucket",
        Some(&service),
        Some(&json!({"name": bucket, "file_size_limit": 100}).to_string()),
    );
    assert_eq!(created.0, 200, "{}", created.1);
    // A body that stops halfway: the client goes away.
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /storage/v1/object/{bucket}/half.bin HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {service}\r\n\
         content-type: application/octet-stream\r\ncontent-length: 90\r\n\r\n0123456789"
    );
    stream.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(stream);
    // Too large for the bucket.
    let big = "x".repeat(500);
    let r = send_to(
        &base,
        "POST",
        &format!("/storage/v1/object/{bucket}/big.bin"),
        &[("authorization", &format!("Bearer {service}")), ("content-type", "application/octet-stream")],
        Some(&big),
    );
    assert_eq!((r.status, r.json()["statusCode"].as_str()), (400, Some("413")));
    std::thread::sleep(std::time::Duration::from_millis(300));
    for name in ["half.bin", "big.bin"] {
        let (status, body) = call("GET", &format!("/object/info/{bucket}/{name}"), Some(&service), None);
        assert_eq!((status, body["message"].as_str()), (400, Some("Object not found")), "{name}");
    }
    assert_eq!(files_in(&dir), Vec::<std::path::PathBuf>::new());
}

#[test]
fn public_reads_follow_every_write_on_postgres() {
    public_reads_follow_every_write(base());
}

#[test]
fn public_reads_follow_every_write_on_sqlite() {
    public_reads_follow_every_write(sqlite_base());
}

/// What is served without credentials changes as soon as a write has answered: a new version,
/// a bucket made private, a deleted object (SQLite keeps rows read as the server between writes).
fn public_reads_follow_every_write(base: &str) {
    let call = |method: &str, path: &str, auth: Option<&str>, body: Option<&str>| {
        call_on(base, method, path, auth, body)
    };
    let service = token(json!({"role": "service_role"}));
    let bucket = format!("follow-{}", std::process::id());
    let public = format!("/object/public/{bucket}/doc.json");
    call("POST", "/bucket", Some(&service), Some(&json!({"name": bucket, "public": true}).to_string()));
    assert_eq!(call("GET", &public, None, None).1["message"], "Object not found");
    call("POST", &format!("/object/{bucket}/doc.json"), Some(&service), Some(r#"{"v": 1}"#));
    assert_eq!(call("GET", &public, None, None), (200, json!({"v": 1})));
    call("PUT", &format!("/object/{bucket}/doc.json"), Some(&service), Some(r#"{"v": 2}"#));
    assert_eq!(call("GET", &public, None, None), (200, json!({"v": 2})));
    call("PUT", &format!("/bucket/{bucket}"), Some(&service), Some(r#"{"public": false}"#));
    assert_eq!(call("GET", &public, None, None).1["message"], "Bucket not found");
    call("PUT", &format!("/bucket/{bucket}"), Some(&service), Some(r#"{"public": true}"#));
    assert_eq!(call("GET", &public, None, None), (200, json!({"v": 2})));
    call("DELETE", &format!("/object/{bucket}/doc.json"), Some(&service), None);
    assert_eq!(call("GET", &public, None, None).1["message"], "Object not found");
}
