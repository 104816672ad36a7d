//! PostgREST's media type handlers (domains named like media types, returned by functions or
//! by aggregates over a table's rows) and raw request bodies for functions, on a server of
//! their own in schema `media`.

use std::sync::OnceLock;

use serde_json::json;

use crate::support::{default_args, harness, send_to, sql, start_server, Resp};

fn base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        sql(r#"
DROP SCHEMA IF EXISTS media CASCADE;
CREATE SCHEMA media;
GRANT USAGE ON SCHEMA media TO web_anon;
CREATE DOMAIN media."text/html" AS text;
CREATE DOMAIN media."text/tab-separated-values" AS text;
CREATE DOMAIN media."application/json" AS json;
CREATE DOMAIN media."application/octet-stream" AS bytea;
CREATE DOMAIN media."*/*" AS bytea;

CREATE FUNCTION media.page(name text) RETURNS media."text/html" LANGUAGE sql AS
  $$ SELECT ('<h1>Hello, ' || name || '</h1>')::media."text/html" $$;
CREATE FUNCTION media.logo() RETURNS media."*/*" LANGUAGE sql AS
  $$ SELECT '\x89504e470d0a'::bytea::media."*/*" $$;
CREATE FUNCTION media.upload(bytea) RETURNS media."application/octet-stream" LANGUAGE sql AS
  $$ SELECT $1::media."application/octet-stream" $$;
CREATE FUNCTION media.shout(text) RETURNS text LANGUAGE sql AS $$ SELECT upper($1) $$;

CREATE TABLE media.lines (id int PRIMARY KEY, name text);
INSERT INTO media.lines VALUES (1, 'line-1'), (2, 'line-2'), (3, 'line-3');
CREATE FUNCTION media.tsv_step(state media."text/tab-separated-values", next media.lines)
  RETURNS media."text/tab-separated-values" LANGUAGE sql AS
  $$ SELECT (state || next.id || E'\t' || next.name || E'\n')::media."text/tab-separated-values" $$;
CREATE AGGREGATE media.tsv(media.lines) (
  initcond = E'id\tname\n', stype = media."text/tab-separated-values", sfunc = media.tsv_step);

-- A table whose application/json is its own.
CREATE TABLE media.counters (name text PRIMARY KEY, n int);
INSERT INTO media.counters VALUES ('a', 1), ('b', 2);
CREATE FUNCTION media.counters_step(state media."application/json", next media.counters)
  RETURNS media."application/json" LANGUAGE sql AS
  $$ SELECT (jsonb_set(state::jsonb, ARRAY[next.name], to_jsonb(next.n)))::json::media."application/json" $$;
CREATE AGGREGATE media.counters_json(media.counters) (
  initcond = '{}', stype = media."application/json", sfunc = media.counters_step);

GRANT SELECT ON ALL TABLES IN SCHEMA media TO web_anon;
GRANT INSERT ON media.lines TO web_anon;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA media TO web_anon;
"#);
        let mut args = default_args(&harness().superuser_uri);
        args.db_schemas = Some("media".into());
        start_server(args)
    })
}

fn get(path: &str, accept: &str) -> Resp {
    send_to(base(), "GET", path, &[("accept", accept)], None)
}

#[test]
fn a_function_returning_a_media_type_answers_it() {
    let r = get("/rpc/page?name=Ada", "text/html");
    assert_eq!(
        (r.status, r.header("content-type"), r.body.as_str()),
        (200, Some("text/html"), "<h1>Hello, Ada</h1>")
    );
    // JSON stays the default, as in PostgREST.
    let r = get("/rpc/page?name=Ada", "application/json");
    assert_eq!((r.status, r.json()), (200, json!("<h1>Hello, Ada</h1>")));
}

#[test]
fn the_any_handler_answers_every_media_type_as_octet_stream() {
    for accept in ["image/png", "*/*", "application/json"] {
        let r = send_to(base(), "GET", "/rpc/logo", &[("accept", accept)], None);
        assert_eq!((r.status, r.header("content-type")), (200, Some("application/octet-stream")), "{accept}");
    }
    let bytes = reqwest::blocking::get(format!("{}/rpc/logo", base())).unwrap().bytes().unwrap();
    assert_eq!(&bytes[..], b"\x89PNG\r\n");
}

#[test]
fn an_aggregate_answers_for_a_tables_rows() {
    let r = get("/lines?order=id.desc&limit=2", "text/tab-separated-values");
    assert_eq!(
        (r.status, r.header("content-type"), r.body.as_str()),
        (200, Some("text/tab-separated-values"), "id\tname\n3\tline-3\n2\tline-2\n")
    );
    // A table's own handlers apply to its whole rows only.
    let r = get("/lines?select=name", "text/tab-separated-values");
    assert_eq!(
        (r.status, r.json()),
        (
            406,
            json!({
                "code": "PGRST107",
                "message": "None of these media types are available: text/tab-separated-values",
                "details": null,
                "hint": null
            })
        )
    );
}

#[test]
fn a_handler_counts_and_makes_a_writes_representation() {
    let r = send_to(
        base(),
        "GET",
        "/lines?order=id&limit=1",
        &[("accept", "text/tab-separated-values"), ("prefer", "count=exact")],
        None,
    );
    assert_eq!(
        (r.status, r.header("content-range"), r.body.as_str()),
        (206, Some("0-0/3"), "id\tname\n1\tline-1\n")
    );
    // Rolled back: the other tests read the table.
    let prefer = ("prefer", "return=representation, tx=rollback");
    let headers = [("accept", "text/tab-separated-values"), ("content-type", "application/json"), prefer];
    let r = send_to(
        base(),
        "POST",
        "/lines",
        &headers,
        Some(r#"[{"id": 4, "name": "line-4"}, {"id": 5, "name": "line-5"}]"#),
    );
    assert_eq!(
        (r.status, r.header("content-type"), r.body.as_str()),
        (201, Some("text/tab-separated-values"), "id\tname\n4\tline-4\n5\tline-5\n")
    );
}

#[test]
fn an_aggregate_can_override_application_json() {
    let r = get("/counters", "application/json");
    assert_eq!(
        (r.status, r.header("content-type"), r.json()),
        (200, Some("application/json; charset=utf-8"), json!({"a": 1, "b": 2}))
    );
    // The vendor types are PostgREST's own, never overridden.
    let r = get("/counters?name=eq.a", "application/vnd.pgrst.object+json");
    assert_eq!(r.json(), json!({"name": "a", "n": 1}));
}

#[test]
fn raw_bodies_go_to_a_single_unnamed_parameter() {
    let bytes: &[u8] = b"\x00\xffbinary\x80";
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/rpc/upload", base()))
        .header("content-type", "application/octet-stream")
        .header("accept", "application/octet-stream")
        .body(bytes.to_vec())
        .send()
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), r.headers()["content-type"].to_str().unwrap().to_owned()),
        (200, "application/octet-stream".to_owned())
    );
    assert_eq!(&r.bytes().unwrap()[..], bytes);
    let r = send_to(base(), "POST", "/rpc/shout", &[("content-type", "text/plain")], Some("hello"));
    assert_eq!((r.status, r.json()), (200, json!("HELLO")));
    // No function takes XML.
    let r = send_to(base(), "POST", "/rpc/shout", &[("content-type", "text/xml")], Some("<a/>"));
    assert_eq!(
        (r.status, r.json()),
        (
            404,
            json!({
                "code": "PGRST202",
                "message": "Could not find the function media.shout in the schema cache",
                "details": "Searched for the function media.shout with a single unnamed xml parameter, but no matches were found in the schema cache.",
                "hint": null
            })
        )
    );
}
