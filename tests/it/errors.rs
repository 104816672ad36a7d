//! Bad input gets PostgREST's error JSON and status ("Errors" in the PostgREST docs).

use serde_json::json;

use crate::support::{check, default_args, get, harness, request, request_to, sql, start_server};

#[test]
fn unknown_table_suggests_a_close_name() {
    let r = check(
        "/itemz",
        404,
        json!({
            "code": "PGRST205",
            "details": null,
            "hint": "Perhaps you meant the table 'test.items'",
            "message": "Could not find the table 'test.itemz' in the schema cache"
        }),
    );
    // PostgREST 13's Proxy-Status names the error; Vary is for answers that are no error.
    assert_eq!((r.header("proxy-status"), r.header("vary")), (Some("PostgREST; error=PGRST205"), None));
    // A name not close enough to any (PostgREST 14: similarity under 0.75) suggests nothing.
    check(
        "/zzzz",
        404,
        json!({
            "code": "PGRST205",
            "details": null,
            "hint": null,
            "message": "Could not find the table 'test.zzzz' in the schema cache"
        }),
    );
}

#[test]
fn answers_vary_by_accept_prefer_and_range() {
    let r = get("/items?id=eq.1&select=id");
    assert_eq!(
        (r.status, r.header("vary"), r.header("proxy-status")),
        (200, Some("Accept, Prefer, Range"), None)
    );
}

#[test]
fn unknown_column_is_42703() {
    check(
        "/items?select=nmae",
        400,
        json!({
            "code": "42703",
            "details": null,
            "hint": "Perhaps you meant to reference the column \"items.name\".",
            "message": "column items.nmae does not exist"
        }),
    );
    let r = get("/items?nonexistent=eq.1");
    assert_eq!((r.status, r.json()["code"].clone()), (400, json!("42703")));
}

#[test]
fn malformed_filter_is_pgrst100() {
    let r = get("/items?id=in.1,2");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["code"], "PGRST100");
    assert_eq!(r.json()["message"], "\"failed to parse filter (in.1,2)\" (line 1, column 4)");
}

#[test]
fn wrong_type_is_22p02() {
    let r = get("/items?id=eq.abc");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["code"], "22P02");
}

#[test]
fn unknown_profile_is_406() {
    let r = request("GET", "/items", &[("Accept-Profile", "nope")]);
    assert_eq!(r.status, 406);
    assert_eq!(
        r.json(),
        json!({
            "code": "PGRST106",
            "details": null,
            "hint": "Only the following schemas are exposed: test, v2",
            "message": "Invalid schema: nope"
        })
    );
}

#[test]
fn unacceptable_media_type_is_406() {
    let r = request("GET", "/items", &[("Accept", "application/xml")]);
    assert_eq!(r.status, 406);
    assert_eq!(r.json()["message"], "None of these media types are available: application/xml");
}

#[test]
fn offset_past_the_end_is_416_with_a_count() {
    let r = request("GET", "/items?offset=100", &[("Prefer", "count=exact")]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("*/20"));
    assert_eq!(r.json()["details"], "An offset of 100 was requested, but there are only 20 rows.");
}

#[test]
fn anonymous_without_grant_is_401() {
    let r = get("/secrets");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_eq!(r.json()["message"], "permission denied for table secrets");
}

#[test]
fn strict_handling_rejects_unknown_preferences() {
    let r = request("GET", "/items", &[("Prefer", "handling=strict, foo=bar")]);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["code"], "PGRST122");
}

#[test]
fn overlong_url_is_414() {
    let long = format!("/items?name=eq.{}", "x".repeat(20_000));
    let r = get(&long);
    assert_eq!(r.status, 414);
    assert_eq!(r.json()["code"], "RG001");
}

#[test]
fn no_anonymous_role_is_401() {
    let mut args = default_args(&harness().superuser_uri);
    args.db_anon_role = None;
    let base = start_server(args);
    let r = request_to(&base, "GET", "/items", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["code"], "PGRST302");
}

#[test]
fn statement_timeout_cancels_slow_reads() {
    sql("CREATE OR REPLACE VIEW test.slow AS SELECT pg_sleep(2)::text AS s;
         GRANT SELECT ON test.slow TO web_anon;");
    let mut args = default_args(&harness().superuser_uri);
    args.db_statement_timeout = Some(100);
    let base = start_server(args);
    let r = request_to(&base, "GET", "/slow", &[]);
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(r.json()["code"], "57014");
    assert_eq!(r.json()["message"], "canceling statement due to statement timeout");
}

#[test]
fn aggregates_are_off_unless_enabled() {
    let mut args = crate::support::default_args(&crate::support::harness().superuser_uri);
    args.db_aggregates_enabled = None;
    let base = crate::support::start_server(args);
    let r = crate::support::request_to(&base, "GET", "/items?select=count()", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("PGRST123")));
}

#[test]
fn minimal_error_verbosity_leaves_out_details_and_hint() {
    let mut args = default_args(&harness().superuser_uri);
    args.client_error_verbosity = Some(rowgate::config::ErrorVerbosity::Minimal);
    let base = start_server(args);
    let r = request_to(&base, "GET", "/itemz", &[]);
    assert_eq!(
        (r.status, r.body.as_str(), r.header("proxy-status")),
        (
            404,
            r#"{"code":"PGRST205","message":"Could not find the table 'test.itemz' in the schema cache"}"#,
            Some("PostgREST; error=PGRST205")
        )
    );
}
