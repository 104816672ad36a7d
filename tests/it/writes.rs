//! Writes that commit: what a client sees afterwards, and that a failed or refused write leaves
//! nothing behind. Each test owns a range of `notes` ids. (Status codes, headers and bodies of
//! every kind of write are compared with PostgREST in the oracle test, all rolled back.)

use serde_json::json;

use crate::support::{default_args, get, harness, send_to, start_server, write};

/// The notes with ids in `range`, as JSON.
fn notes(range: std::ops::Range<i32>) -> serde_json::Value {
    get(&format!("/notes?select=id,body,author&id=gte.{}&id=lt.{}&order=id", range.start, range.end)).json()
}

fn insert_then_read_it_back() {
    let r = write("POST", "/notes", &[], r#"{"id": 100, "body": "hello"}"#);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body, "");
    assert_eq!(notes(100..110), json!([{"id": 100, "body": "hello", "author": "anonymous"}]));
}

fn bulk_insert_whose_1000th_row_fails_writes_nothing() {
    let mut rows: Vec<serde_json::Value> =
        (0..1000).map(|i| json!({"id": 10_000 + i, "body": "ok"})).collect();
    rows[999]["body"] = json!("forbidden");
    let r = write("POST", "/notes", &[], &serde_json::Value::Array(rows).to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["code"], "23514");
    assert_eq!(notes(10_000..11_000), json!([]));

    let rows: Vec<serde_json::Value> = (0..1000).map(|i| json!({"id": 10_000 + i, "body": "ok"})).collect();
    let r =
        write("POST", "/notes", &[("prefer", "count=exact")], &serde_json::Value::Array(rows).to_string());
    assert_eq!((r.status, r.header("content-range")), (201, Some("*/1000")), "{}", r.body);
    assert_eq!(notes(10_000..11_000).as_array().map(Vec::len), Some(1000));
}

fn upsert_inserts_then_merges() {
    let prefer = [("prefer", "resolution=merge-duplicates, return=representation")];
    let r = write("POST", "/notes?select=id,body", &prefer, r#"[{"id": 200, "body": "v1"}]"#);
    assert_eq!((r.status, r.json()), (201, json!([{"id": 200, "body": "v1"}])));
    let r = write("POST", "/notes?select=id,body", &prefer, r#"[{"id": 200, "body": "v2"}]"#);
    assert_eq!((r.status, r.json()), (200, json!([{"id": 200, "body": "v2"}])));
    let ignore = [("prefer", "resolution=ignore-duplicates, return=representation")];
    let r = write(
        "POST",
        "/notes?select=id,body",
        &ignore,
        r#"[{"id": 200, "body": "v3"}, {"id": 201, "body": "new"}]"#,
    );
    assert_eq!((r.status, r.json()), (201, json!([{"id": 201, "body": "new"}])));
    assert_eq!(
        notes(200..210),
        json!([{"id": 200, "body": "v2", "author": "anonymous"}, {"id": 201, "body": "new", "author": "anonymous"}])
    );
}

fn a_merging_upsert_of_nothing_is_200() {
    let prefer = [("prefer", "resolution=merge-duplicates")];
    let r = write("POST", "/notes", &prefer, "[]");
    assert_eq!((r.status, r.body.as_str()), (200, ""));
}

fn order_sorts_a_writes_representation() {
    // PostgREST 13: `order=` orders what a write returns, never which rows it writes.
    let prefer = [("prefer", "return=representation")];
    let payload = r#"[{"id": 700, "body": "a"}, {"id": 701, "body": "b"}, {"id": 702, "body": "c"}]"#;
    let r = write("POST", "/notes?select=id&order=id.desc", &prefer, payload);
    assert_eq!((r.status, r.json()), (201, json!([{"id": 702}, {"id": 701}, {"id": 700}])));
    let r = write(
        "PATCH",
        "/notes?select=id,body&id=gte.700&id=lt.710&order=body.desc",
        &prefer,
        r#"{"author": "x"}"#,
    );
    assert_eq!(
        (r.status, r.json()),
        (200, json!([{"id": 702, "body": "c"}, {"id": 701, "body": "b"}, {"id": 700, "body": "a"}]))
    );
    let r = send_to(
        crate::support::twin::target(&harness().base),
        "DELETE",
        "/notes?select=id&id=gte.700&id=lt.710&order=id.desc",
        &[("prefer", "return=representation")],
        None,
    );
    assert_eq!((r.status, r.json()), (200, json!([{"id": 702}, {"id": 701}, {"id": 700}])));
}

fn put_creates_then_replaces_the_named_row() {
    let r = write(
        "PUT",
        "/notes?id=eq.300",
        &[("prefer", "return=representation")],
        r#"{"id": 300, "body": "a", "author": "me"}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = write("PUT", "/notes?id=eq.300", &[], r#"{"id": 300, "body": "b", "author": "you"}"#);
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(notes(300..310), json!([{"id": 300, "body": "b", "author": "you"}]));
    let r = write("PUT", "/notes?id=eq.300", &[], r#"{"id": 301, "body": "c"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("PGRST115")));
    let r = write("PUT", "/notes?id=eq.300", &[], r#"{"body": "c"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("PGRST115")));
    assert_eq!(notes(300..310), json!([{"id": 300, "body": "b", "author": "you"}]));
}

fn patch_and_delete_change_only_the_filtered_rows() {
    write(
        "POST",
        "/notes",
        &[],
        r#"[{"id": 400, "body": "a"}, {"id": 401, "body": "b"}, {"id": 402, "body": "c"}]"#,
    );
    let r = write("PATCH", "/notes?id=in.(400,401)", &[], r#"{"author": "editor"}"#);
    assert_eq!((r.status, r.header("content-range")), (204, Some("0-1/*")));
    let r = crate::support::request(
        "DELETE",
        "/notes?id=eq.402&select=id",
        &[("prefer", "return=representation")],
    );
    assert_eq!((r.status, r.json()), (200, json!([{"id": 402}])));
    assert_eq!(
        notes(400..410),
        json!([{"id": 400, "body": "a", "author": "editor"}, {"id": 401, "body": "b", "author": "editor"}])
    );
}

fn max_affected_rolls_back_a_write_that_touches_more_rows() {
    write("POST", "/notes", &[], r#"[{"id": 500, "body": "a"}, {"id": 501, "body": "b"}]"#);
    let strict = [("prefer", "handling=strict, max-affected=1")];
    let r = write("PATCH", "/notes?id=gte.500&id=lt.510", &strict, r#"{"author": "bulk"}"#);
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"code": "PGRST124", "message": "Query result exceeds max-affected preference constraint",
               "details": "The query affects 2 rows", "hint": null})
    );
    let r = crate::support::request("DELETE", "/notes?id=gte.500&id=lt.510", &strict);
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(notes(500..510).as_array().map(Vec::len), Some(2));
    // Within the limit it goes through, and says so.
    let r = write("PATCH", "/notes?id=eq.500", &strict, r#"{"author": "one"}"#);
    assert_eq!((r.status, r.header("preference-applied")), (204, Some("handling=strict, max-affected=1")));
    // Without handling=strict, max-affected is ignored, as in PostgREST.
    let r = write(
        "PATCH",
        "/notes?id=gte.500&id=lt.510",
        &[("prefer", "max-affected=1")],
        r#"{"author": "all"}"#,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(
        notes(500..510),
        json!([{"id": 500, "body": "a", "author": "all"}, {"id": 501, "body": "b", "author": "all"}])
    );
}

fn singular_write_of_several_rows_is_406_and_rolled_back() {
    write("POST", "/notes", &[], r#"[{"id": 600, "body": "a"}, {"id": 601, "body": "b"}]"#);
    let r = crate::support::request(
        "DELETE",
        "/notes?id=gte.600&id=lt.610",
        &[("accept", "application/vnd.pgrst.object+json")],
    );
    assert_eq!((r.status, r.json()["code"].as_str()), (406, Some("PGRST116")));
    assert_eq!(notes(600..610).as_array().map(Vec::len), Some(2));
}

fn tx_rollback_leaves_nothing_and_says_so() {
    let r = write(
        "POST",
        "/notes",
        &[("prefer", "tx=rollback, return=representation")],
        r#"{"id": 700, "body": "gone"}"#,
    );
    assert_eq!((r.status, r.header("preference-applied")), (201, Some("return=representation, tx=rollback")));
    assert_eq!(r.json()[0]["id"], 700);
    assert_eq!(notes(700..710), json!([]));
}

#[test]
fn safe_updates_refuse_unfiltered_patch_and_delete() {
    let mut args = default_args(&harness().superuser_uri);
    args.db_safe_updates = Some(true);
    let base = start_server(args);
    let json_body = [("content-type", "application/json")];
    let r = send_to(&base, "PATCH", "/notes", &json_body, Some(r#"{"author": "everyone"}"#));
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            serde_json::json!({
                "code": "21000",
                "details": null,
                "hint": null,
                "message": "UPDATE requires a WHERE clause"
            })
        )
    );
    let r = send_to(&base, "DELETE", "/notes?select=id", &[], None);
    assert_eq!(
        (r.status, r.json()["message"].as_str()),
        (400, Some("DELETE requires a WHERE clause")),
        "{}",
        r.body
    );
    // A filter on an embedded resource does not restrict the write, so it does not count.
    let r = send_to(&base, "DELETE", "/tasks?select=id,projects(id)&projects.id=eq.1", &[], None);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("21000")), "{}", r.body);
    let r = send_to(&base, "PATCH", "/notes?id=eq.-1", &json_body, Some(r#"{"author": "nobody"}"#));
    assert_eq!(r.status, 204, "{}", r.body);
}

#[test]
fn oversized_body_is_413_and_writes_nothing() {
    let mut args = default_args(&harness().superuser_uri);
    args.server_max_body_size = Some(1024);
    let base = start_server(args);
    let rows: Vec<serde_json::Value> = (0..100).map(|i| json!({"id": 800 + i, "body": "x"})).collect();
    let body = serde_json::Value::Array(rows).to_string();
    let r = send_to(&base, "POST", "/notes", &[("content-type", "application/json")], Some(&body));
    assert_eq!((r.status, r.json()["code"].as_str()), (413, Some("RG002")), "{}", r.body);
    assert_eq!(notes(800..900), json!([]));
    // Refused from its Content-Length while the client is still sending 16 MB: the connection
    // reads the rest before closing, so the client gets the answer, not a reset.
    for _ in 0..3 {
        let r = send_to(
            &base,
            "POST",
            "/notes",
            &[("content-type", "application/json")],
            Some(&"x".repeat(16 << 20)),
        );
        assert_eq!((r.status, r.json()["code"].as_str()), (413, Some("RG002")), "{}", r.body);
    }
}

fn writes_are_refused_without_the_privilege() {
    // web_anon may not write categories: 401 for the anonymous role, as PostgREST answers.
    let r = write("POST", "/categories", &[], r#"{"id": 50, "name": "nope"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (401, Some("42501")));
    assert_eq!(get("/categories?id=eq.50").json(), json!([]));
}

#[test]
fn patch_by_key_gives_each_row_its_own_values() {
    write(
        "POST",
        "/notes",
        &[],
        r#"[{"id": 1300, "body": "a"}, {"id": 1301, "body": "b"}, {"id": 1302, "body": "c"}]"#,
    );
    let prefer = [("prefer", "patch=by-key, return=representation")];
    let body = r#"[{"id": 1300, "body": "A", "author": "x"}, {"id": 1301, "body": "B", "author": "y"}, {"id": 1399, "body": "none", "author": "z"}]"#;
    let r = write("PATCH", "/notes?select=id,body,author&order=id", &prefer, body);
    assert_eq!(
        (r.status, r.header("preference-applied")),
        (200, Some("return=representation, patch=by-key"))
    );
    let mut rows = r.json().as_array().cloned().unwrap_or_default();
    rows.sort_by_key(|v| v["id"].as_i64());
    assert_eq!(
        rows,
        vec![
            json!({"id": 1300, "body": "A", "author": "x"}),
            json!({"id": 1301, "body": "B", "author": "y"})
        ]
    );
    assert_eq!(
        notes(1300..1310),
        json!([
            {"id": 1300, "body": "A", "author": "x"},
            {"id": 1301, "body": "B", "author": "y"},
            {"id": 1302, "body": "c", "author": "anonymous"}
        ])
    );
    // Filters still narrow it down; a failing row rolls back every row.
    let r = write(
        "PATCH",
        "/notes?author=eq.nobody",
        &[("prefer", "patch=by-key")],
        r#"[{"id": 1300, "body": "no"}]"#,
    );
    assert_eq!((r.status, r.header("content-range")), (204, Some("*/*")));
    let r = write(
        "PATCH",
        "/notes",
        &[("prefer", "patch=by-key")],
        r#"[{"id": 1300, "body": "ok"}, {"id": 1301, "body": "forbidden"}]"#,
    );
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("23514")));
    assert_eq!(notes(1300..1302).as_array().map(|a| a[0]["body"].clone()), Some(json!("A")));
    // Every object needs the primary key.
    let r = write("PATCH", "/notes", &[("prefer", "patch=by-key")], r#"[{"body": "no id"}]"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("RG021")));
}

#[test]
fn nested_insert_writes_a_parent_with_its_children() {
    let body = r#"[{"customer": "ada", "order_lines": [{"product": "tea", "qty": 2}, {"product": "cake"}]},
                   {"customer": "bob", "order_lines": []},
                   {"customer": "cy"}]"#;
    let prefer = [("prefer", "return=representation, count=exact")];
    let r = write("POST", "/orders?select=customer,order_lines(product,qty)", &prefer, body);
    assert_eq!((r.status, r.header("content-range")), (201, Some("*/3")), "{}", r.body);
    let mut got = r.json().as_array().cloned().unwrap_or_default();
    got.sort_by_key(|o| o["customer"].as_str().map(str::to_owned));
    for o in got.iter_mut() {
        if let Some(lines) = o["order_lines"].as_array_mut() {
            lines.sort_by_key(|l| l["product"].as_str().map(str::to_owned));
        }
    }
    assert_eq!(
        got,
        vec![
            json!({"customer": "ada", "order_lines": [{"product": "cake", "qty": 1}, {"product": "tea", "qty": 2}]}),
            json!({"customer": "bob", "order_lines": []}),
            json!({"customer": "cy", "order_lines": []}),
        ]
    );
}

#[test]
fn nested_insert_is_one_transaction() {
    let body = r#"{"customer": "dora", "order_lines": [{"product": "ok"}, {"product": "forbidden"}]}"#;
    let r = write("POST", "/orders", &[], body);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("23514")), "{}", r.body);
    assert_eq!(get("/orders?customer=eq.dora").json(), json!([]));
    // Children naming an unknown column are refused before anything is written.
    let r = write("POST", "/orders", &[], r#"{"customer": "eve", "order_lines": [{"nope": 1}]}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("PGRST204")), "{}", r.body);
    // An upsert cannot nest.
    let prefer = [("prefer", "resolution=merge-duplicates")];
    let r = write("POST", "/orders", &prefer, r#"{"customer": "fay", "order_lines": []}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("RG022")), "{}", r.body);
}

#[test]
fn patch_by_key_needs_the_whole_key_among_the_written_columns() {
    // columns= leaves the key out: refused, rather than updating every row.
    let r = write(
        "PATCH",
        "/notes?columns=body",
        &[("prefer", "patch=by-key")],
        r#"[{"id": 1300, "body": "x"}]"#,
    );
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("RG021")), "{}", r.body);
}

#[test]
fn nested_insert_has_no_plan() {
    let accept = [("accept", "application/vnd.pgrst.plan")];
    let r = write("POST", "/orders", &accept, r#"{"customer": "gus", "order_lines": [{"product": "x"}]}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("RG022")), "{}", r.body);
    assert_eq!(get("/orders?customer=eq.gus").json(), json!([]));
}

#[test]
fn missing_default_uses_identity_and_domain_defaults() {
    crate::support::sql(
        "DROP TABLE IF EXISTS test.tickets; DROP DOMAIN IF EXISTS test.priority_level;
         CREATE DOMAIN test.priority_level AS integer DEFAULT 3;
         CREATE TABLE test.tickets (id integer GENERATED BY DEFAULT AS IDENTITY (START WITH 100) PRIMARY KEY,
                                    title text NOT NULL, level test.priority_level);
         GRANT SELECT, INSERT ON test.tickets TO web_anon;
         GRANT USAGE ON SEQUENCE test.tickets_id_seq TO web_anon;
         NOTIFY rowgate, 'reload schema';",
    );
    let prefer = [("prefer", "missing=default, return=representation")];
    let body = r#"[{"id": 1, "title": "a", "level": 1}, {"title": "b"}]"#;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut r = write("POST", "/tickets?columns=id,title,level&select=id,title,level", &prefer, body);
    while r.status == 404 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        r = write("POST", "/tickets?columns=id,title,level&select=id,title,level", &prefer, body);
    }
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json(), json!([{"id": 1, "title": "a", "level": 1}, {"id": 100, "title": "b", "level": 3}]));
}

#[test]
fn put_by_a_domain_key_reads_both_sides_through_the_domains_representations() {
    // The URL's `#FF0000` through the cast from text, the body's through the cast from json.
    crate::support::sql(
        "DROP TABLE IF EXISTS test.swatches;
         CREATE TABLE test.swatches (color test.color PRIMARY KEY, name text);
         GRANT SELECT, INSERT, UPDATE ON test.swatches TO web_anon;
         NOTIFY rowgate, 'reload schema';",
    );
    let prefer = [("prefer", "return=representation")];
    let put = |name: &str| {
        write(
            "PUT",
            "/swatches?color=eq.%23FF0000",
            &prefer,
            &format!(r##"{{"color": "#FF0000", "name": "{name}"}}"##),
        )
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut r = put("red");
    while r.status == 404 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        r = put("red");
    }
    assert_eq!((r.status, r.json()), (201, json!([{"color": "#FF0000", "name": "red"}])), "{}", r.body);
    let r = put("crimson");
    assert_eq!((r.status, r.json()), (200, json!([{"color": "#FF0000", "name": "crimson"}])));
    let r = write("PUT", "/swatches?color=eq.%23FF0000", &[], r##"{"color": "#00FF00", "name": "green"}"##);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("PGRST115")));
}

fn a_key_that_is_no_integer_is_400() {
    // A form body's undecodable escape stays as written: "%zz" is no integer. (The messages
    // differ: PostgreSQL names the type and the value, SQLite says "datatype mismatch".)
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let base = crate::support::twin::target(&harness().base);
    let r = send_to(base, "POST", "/notes", &form, Some("id=%zz&body=x"));
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("22P02")), "{}", r.body);
}

crate::on_both!(
    a_merging_upsert_of_nothing_is_200,
    order_sorts_a_writes_representation,
    a_key_that_is_no_integer_is_400,
    insert_then_read_it_back,
    bulk_insert_whose_1000th_row_fails_writes_nothing,
    upsert_inserts_then_merges,
    put_creates_then_replaces_the_named_row,
    patch_and_delete_change_only_the_filtered_rows,
    max_affected_rolls_back_a_write_that_touches_more_rows,
    singular_write_of_several_rows_is_406_and_rolled_back,
    tx_rollback_leaves_nothing_and_says_so,
    writes_are_refused_without_the_privilege,
);
