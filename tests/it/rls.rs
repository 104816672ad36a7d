//! Row-level security sees PostgREST's request settings (`request.jwt.claims`,
//! `request.headers`, `request.method`), so policies written for PostgREST work unchanged.

use serde_json::json;

use crate::support::{check, request};

#[test]
fn anonymous_sees_public_rows_only() {
    check("/documents?select=id&order=id", 200, json!([{"id": 1}, {"id": 4}]));
}

#[test]
fn policies_read_request_headers() {
    let r = request("GET", "/documents?select=id&order=id", &[("X-Tenant", "bob")]);
    assert_eq!(r.json(), json!([{"id": 1}, {"id": 3}, {"id": 4}]));
    // The next request on the same pooled connection must not inherit bob's header.
    check("/documents?select=id&order=id", 200, json!([{"id": 1}, {"id": 4}]));
}

#[test]
fn policies_read_request_method() {
    check("/method_rows?select=id", 200, json!([{"id": 1}]));
    let r = request("HEAD", "/method_rows", &[("Prefer", "count=exact")]);
    assert_eq!(r.header("content-range"), Some("0-0/1"));
}

#[test]
fn reads_run_read_only_as_the_anonymous_role() {
    crate::support::sql(
        "CREATE OR REPLACE VIEW test.session_facts AS
           SELECT current_user::text AS role,
                  current_setting('transaction_read_only') AS read_only,
                  current_setting('request.jwt.claims', true) AS claims,
                  current_setting('request.path', true) AS path,
                  current_setting('search_path') AS search_path;
         GRANT SELECT ON test.session_facts TO web_anon;
         NOTIFY rowgate, 'reload schema';",
    );
    let mut r = request("GET", "/session_facts", &[]);
    for _ in 0..100 {
        if r.status == 200 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        r = request("GET", "/session_facts", &[]);
    }
    assert_eq!(
        r.json(),
        json!([{
            "role": "web_anon",
            "read_only": "on",
            "claims": "{\"role\":\"web_anon\"}",
            "path": "/session_facts",
            "search_path": "\"test\", \"public\""
        }])
    );
}
