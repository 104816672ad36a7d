//! PocketBase's API at `/api/`, differentially: `tests/js/pocketbase_program.mjs` — one app's
//! requests through PocketBase's own JS SDK — run against rowgate on SQLite and on PostgreSQL
//! must get the answers PocketBase 0.40.6 gave it (recorded in
//! `tests/pocketbase/pocketbase-0.40.6.json` by `tests/pocketbase/capture.py`), record ids and
//! times normalised. PocketBase made its collection through its collections API; here the same
//! table is made in SQL, with rules that let everyone do everything, as the collection's
//! empty rules do.

use serde_json::{json, Value};

use crate::sqlite::serve_sqlite;
use crate::support::{default_args, harness, send_to, sql, start_server};

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
DROP SCHEMA IF EXISTS pocketbase_app CASCADE;
CREATE SCHEMA pocketbase_app;
CREATE TABLE pocketbase_app.authors (id text PRIMARY KEY, name text NOT NULL);
CREATE TABLE pocketbase_app.posts (
    id text PRIMARY KEY, title text NOT NULL, author text REFERENCES pocketbase_app.authors (id),
    views double precision NOT NULL DEFAULT 0, published boolean NOT NULL DEFAULT false,
    tags jsonb, meta jsonb, created timestamptz, updated timestamptz);
CREATE TABLE pocketbase_app.comments (
    id text PRIMARY KEY, body text NOT NULL, post text REFERENCES pocketbase_app.posts (id));
GRANT USAGE ON SCHEMA pocketbase_app TO web_anon, authenticated;
GRANT ALL ON ALL TABLES IN SCHEMA pocketbase_app TO web_anon, authenticated;";

#[test]
fn the_sdk_program_gets_pocketbases_answers_on_sqlite() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("app.db");
    let args = rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() };
    let base = serve_sqlite(&path, SQLITE_SCHEMA, EVERYONE, args);
    compare(&base);
}

#[test]
fn the_sdk_program_gets_pocketbases_answers_on_postgres() {
    let h = harness();
    // The accounts installed (and the role `authenticated` made) by the accounts' tests' set-up.
    crate::accounts::postgres();
    sql(POSTGRES_SCHEMA);
    let mut args = default_args(&h.superuser_uri);
    args.db_schemas = Some("pocketbase_app".into());
    args.accounts_enabled = Some(true);
    args.platform.pocketbase = Some(true);
    compare(&start_server(args));
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

fn compare(base: &str) {
    let out = std::process::Command::new("node")
        .arg("pocketbase_program.mjs")
        .arg(base)
        .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js"))
        .output()
        .expect("node runs tests/js/pocketbase_program.mjs");
    assert!(out.status.success(), "the program failed: {}", String::from_utf8_lossy(&out.stderr));
    let ours: Vec<Value> = serde_json::from_slice(&out.stdout).expect("the program prints JSON");
    let recorded: Vec<Value> = serde_json::from_str(RECORDED).expect("the recording is JSON");
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
