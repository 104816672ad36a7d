//! `rowgate demo`: a small demo schema served at once — an SQLite file in a temporary directory
//! (the embedded default), or a throwaway PostgreSQL.

use std::process::ExitCode;
use std::sync::Arc;

use rowgate::config::{Config, ServeArgs};

/// `rowgate demo`: the demo schema on SQLite, or with `postgres` on a throwaway PostgreSQL.
pub async fn demo(port: u16, postgres: bool) -> ExitCode {
    if !postgres {
        return demo_sqlite(port).await;
    }
    eprintln!("rowgate demo: starting a throwaway PostgreSQL ...");
    let cluster = match rowgate::cluster::TempCluster::start() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rowgate demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = cluster.run_sql("postgres", rowgate::cluster::DEMO_SQL).await {
        eprintln!("rowgate demo: loading the demo schema failed: {e}");
        return ExitCode::FAILURE;
    }
    let args = ServeArgs {
        db_uri: Some(cluster.uri("authenticator", "postgres")),
        db_schemas: Some("api".into()),
        db_anon_role: Some("web_anon".into()),
        ..ServeArgs::default()
    };
    let code = serve_demo(args, port, "schema \"api\"").await;
    drop(cluster);
    code
}

/// Serves the demo configured by `args` on `port`, after saying what to try.
async fn serve_demo(mut args: ServeArgs, port: u16, what: &str) -> ExitCode {
    args.server_host = Some("127.0.0.1".into());
    args.server_port = Some(port);
    args.log_level = Some(rowgate::config::LogLevel::Info);
    let config = match Config::load(&args) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("rowgate demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("rowgate demo: serving {what} at http://127.0.0.1:{port}/ — try:");
    eprintln!("  curl 'http://127.0.0.1:{port}/films?select=title,year&year=gte.1990&order=year.desc'");
    eprintln!("  curl 'http://127.0.0.1:{port}/directors' -H 'Accept: text/csv'");
    super::serve(config).await
}

/// The demo on the embedded default: an SQLite file with the demo schema and its rules, in a
/// temporary directory removed at the end.
async fn demo_sqlite(port: u16) -> ExitCode {
    let dir = match tempfile::Builder::new().prefix("rowgate-demo-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rowgate demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (db, rules) = (dir.path().join("demo.db"), dir.path().join("rules.toml"));
    let created = rowgate::backend::Backend::create_sqlite(&db, include_str!("demo_sqlite.sql"))
        .and_then(|()| std::fs::write(&rules, include_str!("demo_rules.toml")).map_err(|e| e.to_string()));
    if let Err(e) = created {
        eprintln!("rowgate demo: creating the demo database failed: {e}");
        return ExitCode::FAILURE;
    }
    let args = ServeArgs {
        db_uri: Some(format!("sqlite:{}", db.display())),
        db_anon_role: Some("anon".into()),
        db_rules: Some(rules),
        ..ServeArgs::default()
    };
    serve_demo(args, port, &format!("the SQLite file {}", db.display())).await
}
