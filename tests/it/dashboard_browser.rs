//! The dashboard in headless Chromium, end to end as a first-time user goes
//! (tests/js/dashboard_page.mjs): the setup link → the first administrator → a table → rows → who
//! may read them → a user → an image and its thumbnail → a change in the realtime inspector → an
//! API key → the latest requests and metrics drawn → a backup (SQLite); on
//! SQLite in an empty directory, and on PostgreSQL after `rowgate install`. The screenshots are
//! kept in `target/dashboard-shots/`.

use std::path::Path;

use serde_json::{json, Value};

use crate::dashboard::serve_in;
use crate::support::{block_on, harness, sql, sql_at, JWT_SECRET};

/// Runs the page test against `base`; what it saw.
fn in_the_browser(base: &str, link: &str, backend: &str) -> Value {
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/dashboard-shots");
    let shots = shots.to_string_lossy();
    crate::support::page_test(
        "dashboard_page.mjs",
        &[("ROWGATE_URL", base), ("SETUP_LINK", link), ("BACKEND", backend), ("SHOTS", &shots)],
    )
}

fn expected(seen: &Value) {
    assert_eq!(seen["admin"], "ada@example.comSign out", "{seen}");
    assert_eq!(seen["rows"], json!(["milk", "eggs"]), "{seen}");
    assert_eq!(seen["visitor"], json!([{"title": "eggs"}, {"title": "milk"}]), "{seen}");
    assert_eq!(seen["thumbnail"], json!([96, 64]), "{seen}");
    let change = seen["change"].as_str().unwrap_or_default();
    assert!(change.starts_with("INSERT notes ") && change.contains("\"title\": \"bread\""), "{seen}");
    assert_eq!(seen["key"], "rg_", "{seen}");
    assert_eq!(seen["signedOut"], json!([200, 400]), "{seen}");
    assert_eq!(seen["channel"], json!(["realtime:rowgate-dashboard", "1", "0", "* public.*"]), "{seen}");
    assert_eq!(seen["errors"], json!([]), "{seen}");
}

#[test]
fn a_first_run_in_the_browser_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let (base, link) = serve_in(
        dir.path(),
        &[
            "--jwt-secret",
            JWT_SECRET,
            "--accounts-enabled",
            "true",
            "--storage-enabled",
            "true",
            "--realtime-enabled",
            "true",
            "--realtime-tables",
            "notes",
        ],
    );
    let seen = in_the_browser(&base, &link.expect("setup link"), "sqlite");
    expected(&seen);
    assert_eq!(seen["backup"], true, "{seen}");
}

#[test]
fn a_first_run_in_the_browser_on_postgresql() {
    let roles = crate::support::roles_lock();
    sql("DROP DATABASE IF EXISTS dashboard_browser");
    sql("CREATE DATABASE dashboard_browser");
    let cfg: tokio_postgres::Config = harness().superuser_uri.parse().expect("uri");
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    let user = cfg.get_user().unwrap_or("postgres").to_owned();
    let superuser = format!("postgres://{user}@127.0.0.1:{port}/dashboard_browser");
    block_on(rowgate::backend::Backend::install(
        &superuser,
        rowgate::backend::Install::Supabase {
            role: "Authenticator".into(),
            replication_role: Some("Authenticator".into()),
        },
    ))
    .expect("install");
    sql_at(&superuser, "ALTER ROLE \"Authenticator\" PASSWORD 'secret'");
    drop(roles);
    let dir = tempfile::tempdir().expect("dir");
    let (base, link) = serve_in(
        dir.path(),
        &[
            "--db-uri",
            &format!("postgres://Authenticator:secret@127.0.0.1:{port}/dashboard_browser"),
            "--db-anon-role",
            "anon",
            "--dashboard-db-uri",
            &superuser,
            "--jwt-secret",
            JWT_SECRET,
            "--accounts-enabled",
            "true",
            "--storage-enabled",
            "true",
            "--realtime-enabled",
            "true",
        ],
    );
    let seen = in_the_browser(&base, &link.expect("setup link"), "postgresql");
    expected(&seen);
    assert_eq!(seen["policies"], json!(["readable", "SELECT", "anon", "true", "NULL"]), "{seen}");
}
