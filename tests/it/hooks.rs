//! PostgREST's server-side hooks: a pre-request function (`db-pre-request`), the response's
//! headers and status set from SQL (`response.headers`, `response.status`), and the whole error
//! response written by `RAISE SQLSTATE 'PGRST'`. On a server of their own, in schema `hooks`.

use std::sync::OnceLock;

use serde_json::json;

use crate::support::{authenticator_uri, default_args, harness, send_to, sql, start_server, Resp};

/// A server of schema `hooks`; `gated` with `db-pre-request = hooks.pre_request`.
fn server(gated: bool) -> &'static str {
    static SCHEMA: OnceLock<()> = OnceLock::new();
    static PLAIN: OnceLock<String> = OnceLock::new();
    static GATED: OnceLock<String> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        sql(r#"
DROP SCHEMA IF EXISTS hooks CASCADE;
DROP SCHEMA IF EXISTS hooks_private CASCADE;
CREATE SCHEMA hooks;
GRANT USAGE ON SCHEMA hooks TO web_anon;

-- Refuses banned clients, and picks the tenant from a header for the rest of the transaction.
CREATE FUNCTION hooks.pre_request() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  headers json := current_setting('request.headers', true)::json;
BEGIN
  IF headers->>'x-client' = 'banned' THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'This client is banned';
  END IF;
  PERFORM set_config('hooks.tenant', coalesce(headers->>'x-tenant', ''), true);
  PERFORM set_config('response.headers', '[{"X-Tenant": "' || coalesce(headers->>'x-tenant', 'none') || '"}]', true);
END $$;

CREATE TABLE hooks.rows (tenant text, name text);
INSERT INTO hooks.rows VALUES ('acme', 'anvil'), ('acme', 'rocket'), ('globex', 'magnet');
CREATE VIEW hooks.my_rows AS
  SELECT name FROM hooks.rows WHERE tenant = current_setting('hooks.tenant', true);

-- A helper, not exposed: login sets its headers through it.
CREATE SCHEMA hooks_private;
GRANT USAGE ON SCHEMA hooks_private TO web_anon;
CREATE FUNCTION hooks_private.add_header(name text, value text) RETURNS void LANGUAGE sql AS $$
  SELECT set_config('response.headers',
    (coalesce(nullif(current_setting('response.headers', true), ''), '[]')::jsonb
      || jsonb_build_array(jsonb_build_object(name, value)))::text, true)
$$;
CREATE FUNCTION hooks.login(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM hooks_private.add_header('Set-Cookie', 'session=' || name || '; HttpOnly; Path=/');
  PERFORM hooks_private.add_header('Set-Cookie', 'theme=dark; Path=/');
  PERFORM hooks_private.add_header('Cache-Control', 'no-store');
END $$;

CREATE FUNCTION hooks.enqueue(job text) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('response.status', '202', true);
  RETURN json_build_object('queued', job);
END $$;

CREATE FUNCTION hooks.find(id int) RETURNS json LANGUAGE plpgsql STABLE AS $$
BEGIN
  PERFORM set_config('response.status', '404', true);
  RETURN json_build_object('error', 'no item ' || id);
END $$;

CREATE FUNCTION hooks.bad_headers() RETURNS text LANGUAGE sql AS
  $$ SELECT set_config('response.headers', '{"X-Not": "an array"}', true) $$;
CREATE FUNCTION hooks.bad_status() RETURNS text LANGUAGE sql AS
  $$ SELECT set_config('response.status', 'teapot', true) $$;

CREATE FUNCTION hooks.pay() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE SQLSTATE 'PGRST' USING
    MESSAGE = '{"code": "BILL1", "message": "Payment required", "details": "Plan expired", "hint": "Renew"}',
    DETAIL = '{"status": 402, "status_text": "Pay Up", "headers": {"X-Billing": "overdue"}}';
END $$;

CREATE FUNCTION hooks.raise_unparsable() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE SQLSTATE 'PGRST' USING MESSAGE = 'not json', DETAIL = '{}';
END $$;

-- A trigger picks the Location of a new job and the status of a cancelled one.
CREATE TABLE hooks.jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'new');
CREATE FUNCTION hooks.jobs_answer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM set_config('response.headers',
      json_build_array(json_build_object('Location', '/jobs/' || NEW.id))::text, true);
  ELSIF NEW.state = 'cancelled' THEN
    PERFORM set_config('response.status', '205', true);
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER jobs_answer BEFORE INSERT OR UPDATE ON hooks.jobs
  FOR EACH ROW EXECUTE FUNCTION hooks.jobs_answer();

GRANT SELECT ON hooks.my_rows TO web_anon;
GRANT SELECT ON hooks.rows TO web_anon;
GRANT SELECT, INSERT, UPDATE ON hooks.jobs TO web_anon;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hooks, hooks_private TO web_anon;
"#);
    });
    let start = |pre_request: Option<&str>| {
        let mut args = default_args(&harness().superuser_uri);
        args.db_schemas = Some("hooks".into());
        args.db_pre_request = pre_request.map(String::from);
        start_server(args)
    };
    match gated {
        false => PLAIN.get_or_init(|| start(None)),
        true => GATED.get_or_init(|| start(Some("hooks.pre_request"))),
    }
}

fn send(base: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    send_to(base, method, path, &all, body)
}

/// A request to the server without a pre-request function.
fn call(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
    send(server(false), method, path, headers, body)
}

/// A request to the server with one.
fn gated(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
    send(server(true), method, path, headers, body)
}

#[test]
fn the_pre_request_function_runs_in_the_request_transaction() {
    // What it sets for the transaction, the view reads; what it sets in response.headers, the
    // response carries.
    let r = gated("GET", "/my_rows?order=name", &[("x-tenant", "acme")], None);
    assert_eq!((r.status, r.json()), (200, json!([{"name": "anvil"}, {"name": "rocket"}])));
    assert_eq!(r.header("x-tenant"), Some("acme"));
    let r = gated("GET", "/my_rows", &[("x-tenant", "globex")], None);
    assert_eq!((r.json(), r.header("x-tenant")), (json!([{"name": "magnet"}]), Some("globex")));
}

#[test]
fn the_pre_request_function_can_refuse_a_request() {
    let r = gated("GET", "/rows", &[("x-client", "banned")], None);
    assert_eq!(
        (r.status, r.json()),
        (403, json!({"code": "PT403", "message": "This client is banned", "details": null, "hint": null}))
    );
    let r = gated("POST", "/jobs", &[("x-client", "banned")], Some(r#"{"id": 99}"#));
    assert_eq!(r.status, 403);
    let r = gated("GET", "/jobs?id=eq.99", &[], None);
    assert_eq!(r.json(), json!([]));
}

#[test]
fn a_function_sets_headers_and_repeats_set_cookie() {
    // Through a helper in a schema that is not exposed: found by its name in login's source.
    let r = call("GET", "/rpc/login?name=ada", &[], None);
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    let cookies: Vec<&str> = r.headers.get_all("set-cookie").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(cookies, ["session=ada; HttpOnly; Path=/", "theme=dark; Path=/"]);
    assert_eq!(r.header("cache-control"), Some("no-store"));
}

#[test]
fn a_function_sets_the_status() {
    let r = call("POST", "/rpc/enqueue", &[], Some(r#"{"job": "resize"}"#));
    assert_eq!((r.status, r.json()), (202, json!({"queued": "resize"})));
}

#[test]
fn a_status_set_by_sql_carries_no_etag() {
    // The ETag validated rowgate's 200: a conditional GET must never turn the 404 into a 304.
    let r = call("GET", "/rpc/find?id=7", &[], None);
    assert_eq!((r.status, r.header("etag"), r.json()), (404, None, json!({"error": "no item 7"})));
}

#[test]
fn a_trigger_sets_the_location_and_the_status() {
    let r = call("POST", "/jobs", &[], Some(r#"{"id": 1}"#));
    assert_eq!((r.status, r.header("location")), (201, Some("/jobs/1")), "{}", r.body);
    let r = call("PATCH", "/jobs?id=eq.1", &[], Some(r#"{"state": "cancelled"}"#));
    assert_eq!((r.status, r.body.as_str()), (205, ""));
}

#[test]
fn unreadable_response_settings_are_a_500() {
    let r = call("GET", "/rpc/bad_headers", &[], None);
    assert_eq!(
        (r.status, r.json()),
        (
            500,
            json!({
                "code": "PGRST111",
                "message": "response.headers guc must be a JSON array composed of objects with a single key and a string value",
                "details": null,
                "hint": null
            })
        )
    );
    let r = call("GET", "/rpc/bad_status", &[], None);
    assert_eq!(
        (r.status, r.json()),
        (
            500,
            json!({"code": "PGRST112", "message": "response.status guc must be a valid status code", "details": null, "hint": null})
        )
    );
}

#[test]
fn raise_pgrst_writes_the_whole_error_response() {
    let r = call("GET", "/rpc/pay", &[], None);
    assert_eq!(
        (r.status, r.header("x-billing"), r.json()),
        (
            402,
            Some("overdue"),
            json!({"code": "BILL1", "message": "Payment required", "details": "Plan expired", "hint": "Renew"})
        )
    );
    // The reason phrase, as the status line carries it.
    let status_line = crate::support::status_line(server(false), "/rpc/pay");
    assert_eq!(status_line, "HTTP/1.1 402 Pay Up");
}

#[test]
fn raise_pgrst_with_a_message_that_is_no_json_is_a_500() {
    let r = call("GET", "/rpc/raise_unparsable", &[], None);
    assert_eq!(
        (r.status, r.json()),
        (
            500,
            json!({
                "code": "PGRST121",
                "message": "Could not parse JSON in the \"RAISE SQLSTATE 'PGRST'\" error",
                "details": "Invalid JSON value for MESSAGE: 'not json'",
                "hint": "MESSAGE must be a JSON object with obligatory keys: 'code', 'message' and optional keys: 'details', 'hint'."
            })
        )
    );
}

#[test]
fn a_pre_request_function_set_on_the_role_in_the_database_is_called() {
    // PostgREST reads `pgrst.*` from the role's settings too (`db-config`), over the file's.
    sql("DO $$ BEGIN CREATE ROLE gated_authenticator LOGIN PASSWORD 'secret' NOINHERIT;
         EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT web_anon TO gated_authenticator;
         CREATE OR REPLACE FUNCTION test.check_caller() RETURNS void LANGUAGE plpgsql AS $$
         BEGIN
           IF current_setting('request.headers', true)::json->>'x-api-version' IS DISTINCT FROM '2' THEN
             RAISE SQLSTATE 'PT400' USING MESSAGE = 'Send X-Api-Version: 2';
           END IF;
         END $$;
         GRANT EXECUTE ON FUNCTION test.check_caller() TO web_anon;
         ALTER ROLE gated_authenticator SET pgrst.db_pre_request = 'test.check_caller';");
    let mut args = default_args(&harness().superuser_uri);
    args.db_uri =
        Some(authenticator_uri(&harness().superuser_uri).replacen("Authenticator", "gated_authenticator", 1));
    let gated = start_server(args);
    let r = send_to(&gated, "GET", "/items?id=eq.1&select=id", &[], None);
    assert_eq!((r.status, r.json()["message"].as_str()), (400, Some("Send X-Api-Version: 2")));
    let r = send_to(&gated, "GET", "/items?id=eq.1&select=id", &[("x-api-version", "2")], None);
    assert_eq!((r.status, r.json()), (200, json!([{"id": 1}])));
}
