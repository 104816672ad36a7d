//! PocketBase's API at `/api/`, differentially: `tests/js/pocketbase_program.mjs` — one app's
//! requests through PocketBase's own JS SDK — run against rowgate on SQLite and on PostgreSQL
//! must get the answers PocketBase 0.40.6 gave it (recorded in
//! `tests/pocketbase/pocketbase-0.40.6.json` by `tests/pocketbase/capture.py`), record ids and
//! times normalised. PocketBase made its collection through its collections API; here the same
//! table is made in SQL, with rules that let everyone do everything, as the collection's
//! empty rules do.

use serde_json::{json, Value};

use crate::sqlite::serve_sqlite;
use crate::support::{block_on, default_args, harness, send_to, sql_at, start_server};

const RECORDED: &str = include_str!("../pocketbase/pocketbase-0.40.6.json");

const SQLITE_SCHEMA: &str = "
CREATE TABLE authors (id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL);
CREATE TABLE posts (
    id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, author TEXT REFERENCES authors (id),
    views REAL NOT NULL DEFAULT 0, published BOOLEAN NOT NULL DEFAULT FALSE, tags JSON, meta JSON,
    created TEXT NOT NULL DEFAULT '', updated TEXT NOT NULL DEFAULT '');
CREATE TABLE comments (id TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL, post TEXT REFERENCES posts (id));";

const EVERYONE: &str = r#"
[authors]
select = { everyone = "true" }
insert = { everyone = "true" }
[posts]
select = { everyone = "true" }
insert = { everyone = "true" }
update = { everyone = "true" }
delete = { everyone = "true" }
[comments]
select = { everyone = "true" }
insert = { everyone = "true" }
"#;

const POSTGRES_SCHEMA: &str = "
CREATE SCHEMA pocketbase_app;
CREATE TABLE pocketbase_app.authors (id text PRIMARY KEY, name text NOT NULL);
CREATE TABLE pocketbase_app.posts (
    id text PRIMARY KEY, title text NOT NULL, author text REFERENCES pocketbase_app.authors (id),
    views double precision NOT NULL DEFAULT 0, published boolean NOT NULL DEFAULT false,
    tags jsonb, meta jsonb, created timestamptz, updated timestamptz);
CREATE TABLE pocketbase_app.comments (
    id text PRIMARY KEY, body text NOT NULL, post text REFERENCES pocketbase_app.posts (id));
DO $$ BEGIN CREATE ROLE service_role NOLOGIN BYPASSRLS; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
GRANT service_role TO \"Authenticator\";
GRANT USAGE ON SCHEMA pocketbase_app TO web_anon, authenticated, service_role;
GRANT ALL ON ALL TABLES IN SCHEMA pocketbase_app TO web_anon, authenticated, service_role;
ALTER PUBLICATION supabase_realtime ADD TABLE pocketbase_app.authors, pocketbase_app.posts, pocketbase_app.comments;
-- A deleted record's event carries it whole, as PocketBase's do.
ALTER TABLE pocketbase_app.posts REPLICA IDENTITY FULL;";

#[test]
fn the_sdk_program_gets_pocketbases_answers_on_sqlite() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("app.db");
    let args = rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() };
    let base = serve_sqlite(&path, SQLITE_SCHEMA, EVERYONE, args);
    compare(&base, &format!("sqlite:{}", path.display()), "--superuser");
}

#[test]
fn the_sdk_program_makes_its_collections_and_gets_pocketbases_answers_on_sqlite() {
    // No tables and no rules: the collections API makes both, as in PocketBase.
    let path = tempfile::tempdir().expect("temp dir").keep().join("app.db");
    let args = rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() };
    let base = serve_sqlite(&path, "", "", args);
    compare(&base, &format!("sqlite:{}", path.display()), "--setup");
}

#[test]
fn the_sdk_program_makes_its_collections_and_gets_pocketbases_answers_on_postgres() {
    let superuser = database("pocketbase_setup");
    sql_at(&superuser, "CREATE SCHEMA pocketbase_app; GRANT USAGE ON SCHEMA pocketbase_app TO PUBLIC;
        DO $$ BEGIN CREATE ROLE service_role NOLOGIN BYPASSRLS; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
        GRANT service_role TO \"Authenticator\";");
    let mut args = postgres_args(&superuser);
    // Collections are made by the dashboard's role, which may create tables.
    args.dashboard_db_uri = Some(superuser.clone());
    compare(&start_server(args), &superuser, "--setup");
}

#[test]
fn the_sdk_program_gets_pocketbases_answers_on_postgres() {
    let superuser = database("pocketbase_sdk");
    sql_at(&superuser, POSTGRES_SCHEMA);
    compare(&start_server(postgres_args(&superuser)), &superuser, "--superuser");
}

/// A server on the database at `superuser` for the program: its app's schema, accounts,
/// realtime (its change feed connecting as `Replicator`) and PocketBase's API.
fn postgres_args(superuser: &str) -> rowgate::config::ServeArgs {
    let mut args = default_args(superuser);
    args.db_uri_replication = args.db_uri.as_ref().map(|u| u.replace("Authenticator", "Replicator"));
    args.db_schemas = Some("pocketbase_app".into());
    args.accounts_enabled = Some(true);
    args.realtime_enabled = Some(true);
    args.platform.pocketbase = Some(true);
    args
}

/// A database of its own on the test cluster, with realtime (its change feed connecting as
/// `Replicator`) and the accounts (with the dashboard's administrators) installed; its
/// superuser's URI.
pub fn database(name: &str) -> String {
    // The role `authenticated` (cluster-wide) made by the accounts' tests' set-up.
    crate::accounts::postgres();
    // One at a time: the installs grant cluster-wide roles.
    let _one_at_a_time = crate::support::roles_lock();
    let superuser = crate::support::realtime_database(name);
    let uri = superuser.clone();
    block_on(async move {
        let client = rowgate::backend::postgres::connect_without_tls(&uri.parse().unwrap()).await.unwrap();
        rowgate::backend::postgres::accounts_install::install(&client, "Authenticator")
            .await
            .expect("accounts");
    });
    superuser
}

#[test]
fn it_is_on_by_default_on_sqlite_only() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("app.db");
    let base = serve_sqlite(&path, SQLITE_SCHEMA, EVERYONE, Default::default());
    let r = send_to(&base, "GET", "/api/health", &[], None);
    assert_eq!((r.status, r.json()), (200, json!({"message": "API is healthy.", "code": 200, "data": {}})));
    let r = send_to(&harness().base, "GET", "/api/health", &[], None);
    assert_eq!(r.status, 404, "{}", r.body);
}

/// The superuser PocketBase's run made (`capture.py`): here one of the dashboard's
/// administrators, made by `rowgate superuser upsert` as PocketBase's own command makes one.
const SUPERUSER: [&str; 2] = ["admin@example.com", "password-123"];

/// Runs the program against `base` (`--setup`: it makes its collections first) and compares
/// every answer with PocketBase's.
fn compare(base: &str, db_uri: &str, flag: &str) {
    let upserted = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["superuser", "upsert", SUPERUSER[0], SUPERUSER[1], "--db-uri", db_uri])
        .output()
        .expect("rowgate superuser upsert runs");
    assert!(upserted.status.success(), "{}", String::from_utf8_lossy(&upserted.stderr));
    let out = std::process::Command::new("node")
        .arg("pocketbase_program.mjs")
        .args([base, flag, SUPERUSER[0], SUPERUSER[1]])
        .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js"))
        .output()
        .expect("node runs tests/js/pocketbase_program.mjs");
    assert!(out.status.success(), "the program failed: {}", String::from_utf8_lossy(&out.stderr));
    let ours: Vec<Value> = serde_json::from_slice(&out.stdout).expect("the program prints JSON");
    let mut recorded: Vec<Value> = serde_json::from_str(RECORDED).expect("the recording is JSON");
    // Over tables made in SQL the program leaves out the collections API's steps.
    if flag != "--setup" {
        recorded.retain(|step| {
            let name = step["name"].as_str().unwrap_or_default();
            !["collections: ", "rules: ", "values: "].iter().any(|p| name.starts_with(p))
        });
    }
    assert_eq!(ours.len(), recorded.len(), "the program ran other steps than were recorded");
    let (mut ours_ids, mut their_ids) = (Vec::new(), Vec::new());
    let mut differences = Vec::new();
    for (mine, theirs) in ours.into_iter().zip(recorded) {
        let name = theirs["name"].as_str().unwrap_or_default().to_owned();
        let (mine, theirs) = (normalised(mine, &mut ours_ids), normalised(theirs, &mut their_ids));
        if mine != theirs {
            differences.push(format!("{name}:\n  rowgate:    {mine}\n  PocketBase: {theirs}"));
        }
    }
    assert!(differences.is_empty(), "{} steps differ:\n{}", differences.len(), differences.join("\n"));
}

/// Record ids (PocketBase's, and the accounts' UUIDs) as the order they were first seen in,
/// times as `DATE`, tokens as `TOKEN`: what differs between two runs of the same program. A
/// user's `verified` too: without SMTP, rowgate's accounts take an address as confirmed at
/// sign-up (GoTrue's autoconfirm, docs/pocketbase.md), where PocketBase leaves it unverified.
fn normalised(v: Value, ids: &mut Vec<String>) -> Value {
    match v {
        Value::String(s) if s.starts_with("eyJ") && s.matches('.').count() == 2 => {
            Value::String("TOKEN".into())
        }
        Value::Object(mut o) if o.get("collectionName") == Some(&json!("users")) => {
            o.insert("verified".into(), json!("VERIFIED"));
            Value::Object(o.into_iter().map(|(k, v)| (k, normalised(v, ids))).collect())
        }
        Value::String(s) if is_record_id(&s) || is_uuid(&s) => {
            let n = ids.iter().position(|i| *i == s).unwrap_or_else(|| {
                ids.push(s.clone());
                ids.len() - 1
            });
            Value::String(format!("ID{n}"))
        }
        Value::String(s) if is_time(&s) => Value::String("DATE".into()),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| normalised(v, ids)).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, normalised(v, ids))).collect()),
        v => v,
    }
}

fn is_record_id(s: &str) -> bool {
    s.len() == 15 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        })
}

fn is_time(s: &str) -> bool {
    s.len() == 24 && s.ends_with('Z') && s.as_bytes().get(10) == Some(&b' ')
}

#[test]
fn a_signed_out_session_is_not_refreshed() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("app.db");
    let args = rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() };
    let base = serve_sqlite(&path, SQLITE_SCHEMA, EVERYONE, args);
    let json = [("content-type", "application/json")];
    let body =
        json!({"email": "kim@example.com", "password": "secret-pass-1", "passwordConfirm": "secret-pass-1"});
    let r = send_to(&base, "POST", "/api/collections/users/records", &json, Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = json!({"identity": "kim@example.com", "password": "secret-pass-1"});
    let r =
        send_to(&base, "POST", "/api/collections/users/auth-with-password", &json, Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let token = r.json()["token"].as_str().expect("a token").to_owned();
    // PocketBase's SDK sends the token as it is; `/auth/v1` takes it as a bearer token.
    let r = send_to(&base, "POST", "/api/collections/users/auth-refresh", &[("authorization", &token)], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let bearer = format!("Bearer {token}");
    let r = send_to(&base, "POST", "/auth/v1/logout", &[("authorization", &bearer)], None);
    assert_eq!(r.status, 204, "{}", r.body);
    let r = send_to(&base, "POST", "/api/collections/users/auth-refresh", &[("authorization", &token)], None);
    assert_eq!(
        (r.status, r.json()),
        (
            401,
            json!({"data": {}, "message": "The request requires valid record authorization token.", "status": 401})
        )
    );
}

/// With no configuration at all, an SQLite file keeps a secret of its own beside it (made at the
/// first start, its owner's alone), so a superuser — one of the dashboard's administrators —
/// signs in, and their token still verifies after a restart.
#[test]
fn on_a_bare_sqlite_file_a_superuser_signs_in_with_the_files_own_secret() {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let path = dir.join("app.db");
    rusqlite::Connection::open(&path).expect("create").execute_batch(SQLITE_SCHEMA).expect("schema");
    let uri = format!("sqlite:{}", path.display());
    let upserted = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["superuser", "upsert", "root@example.com", "root-password-1", "--db-uri", &uri])
        .output()
        .expect("rowgate superuser upsert runs");
    assert_eq!(
        String::from_utf8_lossy(&upserted.stdout),
        "administrator root@example.com added: sign in at /_/\n"
    );
    let serve = || {
        start_server(rowgate::config::ServeArgs {
            db_uri: Some(uri.clone()),
            server_host: Some("127.0.0.1".into()),
            ..Default::default()
        })
    };
    let base = serve();
    let secret = dir.join("app.jwt-secret");
    assert_eq!(std::fs::read_to_string(&secret).expect("the secret is kept").len(), 64);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let json = [("content-type", "application/json")];
    let body = json!({"identity": "root@example.com", "password": "root-password-1"}).to_string();
    let path = "/api/collections/_superusers/auth-with-password?fields=record.email,record.verified";
    let r = send_to(&base, "POST", path, &json, Some(&body));
    assert_eq!(
        (r.status, r.json()),
        (200, json!({"record": {"email": "root@example.com", "verified": true}}))
    );
    let r = send_to(&base, "POST", "/api/collections/_superusers/auth-with-password", &json, Some(&body));
    let token = r.json()["token"].as_str().expect("a token").to_owned();
    // A superuser is bound by no rule (there is no rules file: nobody else may read).
    let list = "/api/collections/posts/records?fields=title";
    let r = send_to(&base, "GET", list, &[], None);
    assert_eq!(r.status, 403, "{}", r.body);
    let r = send_to(&serve(), "GET", list, &[("authorization", &token)], None);
    assert_eq!(
        (r.status, r.json()),
        (200, json!({"items": [], "page": 1, "perPage": 30, "totalItems": 0, "totalPages": 0}))
    );
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["superuser", "upsert", "root@example.com", "new-password-22", "--db-uri", &uri])
        .output()
        .expect("rowgate superuser upsert runs");
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "administrator root@example.com's password replaced: their sessions ended\n"
    );
    let r = send_to(&base, "POST", "/api/collections/_superusers/auth-with-password", &json, Some(&body));
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"data": {}, "message": "Failed to authenticate.", "status": 400}))
    );
    // A token from before the password was replaced is refreshed no more.
    let r = send_to(
        &base,
        "POST",
        "/api/collections/_superusers/auth-refresh",
        &[("authorization", &token)],
        None,
    );
    assert_eq!(r.status, 401, "{}", r.body);
}
