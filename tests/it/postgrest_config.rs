//! A PostgREST deployment switched by changing the binary: its configuration file, as it is,
//! and its `PGRST_*` variables.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::support::{authenticator_uri, harness, request_to, sql, start_server, wait_ready};

const ROWGATE: &str = env!("CARGO_BIN_EXE_rowgate");

#[test]
fn a_postgrest_configuration_file_serves_as_it_is() {
    sql("CREATE OR REPLACE FUNCTION test.greeting() RETURNS text LANGUAGE sql STABLE
           AS $$ SELECT current_setting('app.settings.greeting', true) $$;
         GRANT EXECUTE ON FUNCTION test.greeting() TO web_anon;");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("postgrest.conf");
    let conf = format!(
        "# PostgREST's syntax: on/off, numbers as strings, $$ for a dollar, app.settings\n\
         db-uri = \"{}\"\n\
         db-schemas = \"test\"\n\
         db-anon-role = \"web_anon\"\n\
         max-rows = \"2\"\n\
         db-plan-enabled = off\n\
         jwt-role-claim-key = \"$$.role\"\n\
         app.settings.greeting = \"hello, world\"\n\
         db-pool-max-lifetime = 1800\n",
        authenticator_uri(&harness().superuser_uri)
    );
    std::fs::write(&file, conf).unwrap();
    let args = rowgate::config::ServeArgs { config: Some(file), ..Default::default() };
    let base = start_server(args);
    let r = request_to(&base, "GET", "/items?select=id&order=id", &[]);
    assert_eq!((r.status, r.json()), (200, json!([{"id": 1}, {"id": 2}])));
    let r = request_to(&base, "GET", "/rpc/greeting", &[]);
    assert_eq!((r.status, r.json()), (200, json!("hello, world")));
}

#[test]
fn pgrst_variables_configure_the_server() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(ROWGATE)
        .arg("serve")
        .env_remove("ROWGATE_DB_URI")
        .env("PGRST_DB_URI", authenticator_uri(&harness().superuser_uri))
        .env("PGRST_DB_SCHEMAS", "test")
        .env("PGRST_DB_ANON_ROLE", "web_anon")
        .env("PGRST_SERVER_HOST", "127.0.0.1")
        .env("PGRST_SERVER_PORT", port.to_string())
        .env("PGRST_DB_MAX_ROWS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&base);
    let r = request_to(&base, "GET", "/items?select=id&order=id", &[]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((r.status, r.json()), (200, json!([{"id": 1}])));
}

#[test]
fn a_pre_config_function_rowgate_cannot_call_stops_start_up() {
    // It may set a pre-request function: serving without it would let in the callers that one
    // refuses.
    let out = Command::new(ROWGATE)
        .arg("serve")
        .env_remove("ROWGATE_DB_URI")
        .env("PGRST_DB_URI", "postgres://x@localhost/db")
        .env("PGRST_DB_PRE_CONFIG", "postgrest.pre_config")
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
        (
            Some(2),
            "rowgate: invalid db-pre-config: rowgate does not call a pre-config function yet; remove the option to serve without it\n"
        )
    );
}
