//! Reads as the PostgREST docs describe them ("Tables and Views"): one request, one response.

use serde_json::json;

use crate::support::{check, default_args, get, harness, request, request_to, send_raw, sql, start_server};

#[test]
fn select_renames_and_casts() {
    check(
        "/items?select=id,item_name:name,price::text&id=eq.1",
        200,
        json!([{"id": 1, "item_name": "hammer", "price": "12.50"}]),
    );
}

fn json_paths_name_the_last_key() {
    check(
        "/items?select=id,data->>color,data->dims->0&id=eq.1",
        200,
        json!([{"id": 1, "color": "red", "dims": 10}]),
    );
}

fn filters_combine_with_and_and_or() {
    check(
        "/items?select=id&or=(id.eq.1,id.eq.3,and(id.gt.4,id.lt.6))&order=id",
        200,
        json!([{"id": 1}, {"id": 3}, {"id": 5}]),
    );
    check(
        "/items?select=id&id=not.in.(2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20)",
        200,
        json!([{"id": 1}]),
    );
}

#[test]
fn like_uses_star_as_wildcard() {
    check("/items?select=name&name=like.*ench&order=id", 200, json!([{"name": "wrench"}]));
    check(
        "/items?select=name&name=ilike(any).{HAM*,*RENCH}&order=id",
        200,
        json!([{"name": "hammer"}, {"name": "wrench"}]),
    );
}

#[test]
fn array_and_range_operators() {
    check("/items?select=id&tags=cs.{food,fruit}&order=id", 200, json!([{"id": 3}, {"id": 4}]));
    let r = get("/types?select=id&c_int4range=adj.[6,10)");
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_read_says_where_it_can_be_read_again() {
    // PostgREST's Content-Location: the table and the query string in canonical form (sorted).
    let r = get("/items?select=id&id=eq.1");
    assert_eq!((r.status, r.header("content-location")), (200, Some("/items?id=eq.1&select=id")));
    let r = request("HEAD", "/items", &[]);
    assert_eq!((r.status, r.header("content-location")), (200, Some("/items")));
    // A function's result is no table's representation.
    let r = get("/rpc/add_them?a=1&b=2");
    assert_eq!((r.status, r.header("content-location")), (200, None));
}

#[test]
fn full_text_search_through_domains_over_tsvector() {
    // PostgREST resolves a domain over a domain to its base type: the column is searched as
    // the tsvector it is, not through `to_tsvector` (which no domain has: 42883).
    sql("DROP SCHEMA IF EXISTS fts_domains CASCADE;
         CREATE SCHEMA fts_domains;
         CREATE DOMAIN fts_domains.document AS tsvector;
         CREATE DOMAIN fts_domains.indexed AS fts_domains.document;
         CREATE TABLE fts_domains.notes (id int PRIMARY KEY, words fts_domains.indexed);
         INSERT INTO fts_domains.notes VALUES (1, to_tsvector('english', 'fat cats')),
                                              (2, to_tsvector('english', 'quick fox'));
         GRANT USAGE ON SCHEMA fts_domains TO web_anon;
         GRANT SELECT ON fts_domains.notes TO web_anon;");
    let mut args = default_args(&harness().superuser_uri);
    args.db_schemas = Some("fts_domains".into());
    let base = start_server(args);
    let r = request_to(&base, "GET", "/notes?select=id&words=fts(english).cat", &[]);
    assert_eq!((r.status, r.json()), (200, json!([{"id": 1}])));
}

#[test]
fn full_text_search_with_language() {
    let r = get("/articles?select=id&tsv=fts(english).cats");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.json().as_array().unwrap().is_empty(), "{}", r.body);
}

fn order_and_pagination() {
    let r = check("/items?select=id&order=id.desc&limit=2&offset=1", 200, json!([{"id": 19}, {"id": 18}]));
    assert_eq!(r.header("content-range"), Some("1-2/*"));
}

fn exact_count_gives_partial_content() {
    let r = request("GET", "/items?select=id&limit=2", &[("Prefer", "count=exact")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("0-1/20"));
    assert_eq!(r.header("preference-applied"), Some("count=exact"));
}

fn range_header_selects_rows() {
    let r = request("GET", "/items?select=id&order=id", &[("Range-Unit", "items"), ("Range", "2-3")]);
    assert_eq!(r.json(), json!([{"id": 3}, {"id": 4}]));
    assert_eq!(r.header("content-range"), Some("2-3/*"));
}

fn head_has_headers_but_no_body() {
    let r = request("HEAD", "/items?limit=5", &[("Prefer", "count=exact")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("0-4/20"));
    assert_eq!(r.body, "");
}

#[test]
fn csv_output() {
    let r = request("GET", "/items?select=id,name,tags&id=lt.3&order=id", &[("Accept", "text/csv")]);
    assert_eq!(r.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(r.body, "id,name,tags\n1,hammer,\"{tool,metal}\"\n2,screwdriver,{tool}");
}

fn singular_object() {
    let accept = [("Accept", "application/vnd.pgrst.object+json")];
    let r = request("GET", "/items?select=id,name&id=eq.1", &accept);
    assert_eq!(r.json(), json!({"id": 1, "name": "hammer"}));
    let r = request("GET", "/items?select=id&id=gt.18", &accept);
    assert_eq!(r.status, 406);
    assert_eq!(r.json()["code"], "PGRST116");
    assert_eq!(r.json()["details"], "The result contains 2 rows");
}

#[test]
fn stripped_nulls() {
    let r = request(
        "GET",
        "/items?select=id,price&id=eq.7",
        &[("Accept", "application/vnd.pgrst.array+json;nulls=stripped")],
    );
    assert_eq!(r.body, r#"[{"id":7}]"#);
}

#[test]
fn accept_profile_selects_a_schema() {
    let r = request("GET", "/items?select=name&id=eq.1", &[("Accept-Profile", "v2")]);
    assert_eq!(r.json(), json!([{"name": "v2 hammer"}]));
    assert_eq!(r.header("content-profile"), Some("v2"));
}

#[test]
fn percent_encoded_and_unicode_names() {
    let r = get("/Order%20Items?select=Unit%20Price&limit=1");
    assert_eq!(r.status, 200, "{}", r.body);
    let r = get("/categor%C3%ADas?limit=1");
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn values_render_as_postgrest_renders_them() {
    let r = get("/types?select=c_numeric,c_timestamp,c_timestamptz,c_int_arr,c_bool,c_uuid,c_bytea&id=eq.1");
    let row = &r.json()[0];
    assert_eq!(row["c_timestamptz"], "2024-01-15T11:45:30+00:00", "{}", r.body);
    assert!(row["c_int_arr"].is_array(), "{}", r.body);
    assert!(row["c_bool"].is_boolean(), "{}", r.body);
}

#[test]
fn plan_media_type_answers_with_the_explain_output() {
    let accept = [("accept", "application/vnd.pgrst.plan")];
    let r = crate::support::request("GET", "/items?select=id&id=eq.1", &accept);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.pgrst.plan+text; for=\"application/json\"; charset=utf-8")
    );
    assert!(r.body.contains("Scan"), "{}", r.body);

    let accept = [("accept", "application/vnd.pgrst.plan+json; for=\"text/csv\"; options=analyze|verbose")];
    let r = crate::support::request("GET", "/items?select=id,name&id=lt.3", &accept);
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.pgrst.plan+json; for=\"text/csv\"; options=analyze|verbose; charset=utf-8")
    );
    assert_eq!(r.json()[0]["Plan"]["Actual Rows"], 2, "{}", r.body);

    // postgrest-js's `.explain()` with no option chosen ends with `options=;`; options come
    // back in PostgREST's order, and one it does not know is ignored.
    let accept = [("accept", "application/vnd.pgrst.plan+text; for=\"application/json\"; options=;")];
    let r = crate::support::request("GET", "/items?select=id&id=eq.1", &accept);
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/vnd.pgrst.plan+text; for=\"application/json\"; charset=utf-8"))
    );
    let accept = [("accept", "application/vnd.pgrst.plan+json; options=verbose|fast|analyze")];
    let r = crate::support::request("GET", "/items?select=id&id=eq.1", &accept);
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/vnd.pgrst.plan+json; for=\"application/json\"; options=analyze|verbose; charset=utf-8"))
    );
}

#[test]
fn plan_of_a_write_with_analyze_is_rolled_back() {
    let accept = [("accept", "application/vnd.pgrst.plan+json; options=analyze")];
    let r = crate::support::write("POST", "/notes", &accept, r#"{"id": 1200, "body": "explained"}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()[0]["Plan"].is_object(), "{}", r.body);
    assert_eq!(crate::support::get("/notes?id=eq.1200").json(), serde_json::json!([]));
}

#[test]
fn plan_media_type_is_406_unless_enabled() {
    let mut args = crate::support::default_args(&crate::support::harness().superuser_uri);
    args.db_plan_enabled = None;
    let base = crate::support::start_server(args);
    let r = crate::support::request_to(&base, "GET", "/items", &[("accept", "application/vnd.pgrst.plan")]);
    assert_eq!((r.status, r.json()["code"].as_str()), (406, Some("PGRST107")));
}

#[test]
fn two_casts_in_a_row() {
    crate::support::check("/items?select=id::text::int4&id=eq.1", 200, serde_json::json!([{"id": 1}]));
}

fn etag_and_if_none_match_give_304_while_the_answer_is_the_same() {
    let r = get("/items?select=id,name&id=lt.3&order=id");
    let etag = r.header("etag").expect("an ETag on a GET").to_owned();
    let r = request("GET", "/items?select=id,name&id=lt.3&order=id", &[("if-none-match", &etag)]);
    assert_eq!((r.status, r.body.as_str(), r.header("etag")), (304, "", Some(etag.as_str())));
    let weak = format!("W/{etag}");
    let r = request("GET", "/items?select=id,name&id=lt.3&order=id", &[("if-none-match", &weak)]);
    assert_eq!(r.status, 304);
    // Another answer has another tag.
    let r = request("GET", "/items?select=id,name&id=lt.4&order=id", &[("if-none-match", &etag)]);
    assert_eq!(r.status, 200);
    assert_ne!(r.header("etag"), Some(etag.as_str()));
}

fn row_counts_beyond_bigint_are_400() {
    for path in ["/items?offset=99999999999999999999999", "/items?limit=99999999999999999999"] {
        let r = request("GET", path, &[]);
        assert_eq!(
            (r.status, r.json()),
            (400, json!({"code": "22003", "message": "bigint out of range", "details": null, "hint": null})),
            "{path}"
        );
    }
}

crate::on_both!(
    row_counts_beyond_bigint_are_400,
    json_paths_name_the_last_key,
    filters_combine_with_and_and_or,
    order_and_pagination,
    exact_count_gives_partial_content,
    range_header_selects_rows,
    head_has_headers_but_no_body,
    singular_object,
    etag_and_if_none_match_give_304_while_the_answer_is_the_same,
);

#[test]
fn urls_with_raw_angle_brackets_and_quotes_as_curl_sends_them() {
    // PostgREST's docs write `->>` and `"..."` in URLs, and curl sends them unencoded, on one
    // connection with whatever came before.
    let answers = send_raw(
        &harness().base,
        &[
            ("GET /items?select=id,color:data->>color&name=in.(\"a,b\",hammer)&order=id HTTP/1.1", ""),
            (
                "POST /notes HTTP/1.1\r\nContent-Type: application/json\r\nPrefer: tx=rollback",
                r#"{"id":9000,"body":"<\">"}"#,
            ),
            ("GET /items?select=id&data->>label=eq.quote\"d HTTP/1.1", ""),
        ],
    );
    assert_eq!(
        answers,
        vec![
            (200, "[{\"id\":1,\"color\":\"red\"}, \n {\"id\":13,\"color\":null}]".to_owned()),
            (201, String::new()),
            (200, r#"[{"id":14}]"#.to_owned()),
        ]
    );
}

#[test]
fn full_text_search_on_json_and_text_columns_goes_through_to_tsvector() {
    // PostgREST 13: `fts` on a column that is no tsvector searches `to_tsvector(column)`.
    check("/items?data=fts.red&select=id&order=id", 200, json!([{"id": 1}, {"id": 3}]));
    check("/items?name=plfts(english).hammers&select=id", 200, json!([{"id": 1}]));
}

#[test]
fn prefer_timezone_takes_what_postgresql_takes() {
    // As PostgREST 16: a POSIX offset (whose sign PostgreSQL reads the POSIX way) ...
    let r = request("GET", "/types?select=c_timestamptz&id=eq.1", &[("prefer", "timezone=+05:30")]);
    assert_eq!(
        (r.status, r.header("preference-applied"), r.json()),
        (200, Some("timezone=+05:30"), json!([{"c_timestamptz": "2024-01-15T06:15:30-05:30"}]))
    );
    // ... and a zone PostgreSQL refuses is its error, whatever `handling` says.
    let r = request("GET", "/types?select=c_timestamptz&id=eq.1", &[("prefer", "timezone=Nowhere/City")]);
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({
                "code": "22023",
                "details": null,
                "hint": null,
                "message": "invalid value for parameter \"TimeZone\": \"Nowhere/City\""
            })
        )
    );
}

#[test]
fn a_domains_representation_shapes_answers_filters_and_bodies() {
    // PostgREST's "Domain Representations": implicit casts from the domain to json, and from
    // text and json to the domain.
    check(
        "/labels?select=id,color&order=id",
        200,
        json!([{"id": 1, "color": "#000000"}, {"id": 2, "color": "#000100"}, {"id": 3, "color": "#01E240"}]),
    );
    check("/labels?select=id&color=eq.000100", 200, json!([{"id": 2}]));
    check("/labels?select=id&color=in.(000100,01E240)&order=id", 200, json!([{"id": 2}, {"id": 3}]));
    let r = crate::support::write(
        "POST",
        "/labels",
        &[("prefer", "return=representation, tx=rollback")],
        r##"{"id": 9, "color": "#ABCDEF"}"##,
    );
    assert_eq!((r.status, r.json()), (201, json!([{"id": 9, "color": "#ABCDEF"}])));
}
