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

const SQLITE_SCHEMA: &str = "CREATE TABLE posts (
    id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, views REAL NOT NULL DEFAULT 0,
    published BOOLEAN NOT NULL DEFAULT FALSE, tags JSON, meta JSON,
    created TEXT NOT NULL DEFAULT '', updated TEXT NOT NULL DEFAULT '')";

const EVERYONE: &str = r#"
[posts]
select = { everyone = "true" }
insert = { everyone = "true" }
update = { everyone = "true" }
delete = { everyone = "true" }
"#;

const POSTGRES_SCHEMA: &str = "
DROP SCHEMA IF EXISTS pocketbase_app CASCADE;
CREATE SCHEMA pocketbase_app;
CREATE TABLE pocketbase_app.posts (
    id text PRIMARY KEY, title text NOT NULL, views double precision NOT NULL DEFAULT 0,
    published boolean NOT NULL DEFAULT false, tags jsonb, meta jsonb,
    created timestamptz, updated timestamptz);
GRANT USAGE ON SCHEMA pocketbase_app TO web_anon;
GRANT ALL ON pocketbase_app.posts TO web_anon;";

#[test]
fn the_sdk_program_gets_pocketbases_answers_on_sqlite() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("app.db");
    let base = serve_sqlite(&path, SQLITE_SCHEMA, EVERYONE, Default::default());
    compare(&base);
}

#[test]
fn the_sdk_program_gets_pocketbases_answers_on_postgres() {
    let h = harness();
    sql(POSTGRES_SCHEMA);
    let mut args = default_args(&h.superuser_uri);
    args.db_schemas = Some("pocketbase_app".into());
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

/// Record ids as the order they were first seen in, times as `DATE`: what differs between two
/// runs of the same program.
fn normalised(v: Value, ids: &mut Vec<String>) -> Value {
    match v {
        Value::String(s) if is_record_id(&s) => {
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

fn is_time(s: &str) -> bool {
    s.len() == 24 && s.ends_with('Z') && s.as_bytes().get(10) == Some(&b' ')
}
