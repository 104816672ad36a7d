//! RPC calls that commit, and what they leave behind. (Every result shape, overload
//! resolution and error of `/rpc` is compared with PostgREST in the oracle test.) These tests
//! own the `notes` ids 1000 to 1099.

use serde_json::json;

use crate::support::{get, request, write};

#[test]
fn post_to_a_volatile_function_commits() {
    let r = write("POST", "/rpc/add_note?select=id,body", &[], r#"{"id": 1000, "body": "via rpc"}"#);
    assert_eq!((r.status, r.json()), (200, json!({"id": 1000, "body": "via rpc"})), "{}", r.body);
    assert_eq!(get("/notes?id=eq.1000&select=body").json(), json!([{"body": "via rpc"}]));
}

#[test]
fn get_runs_read_only() {
    let r = request("GET", "/rpc/add_note?id=1001&body=nope", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (405, Some("25006")), "{}", r.body);
    assert_eq!(get("/notes?id=eq.1001").json(), json!([]));
}

#[test]
fn tx_rollback_undoes_the_call() {
    let r = write("POST", "/rpc/add_note", &[("prefer", "tx=rollback")], r#"{"id": 1002, "body": "gone"}"#);
    assert_eq!((r.status, r.header("preference-applied")), (200, Some("tx=rollback")), "{}", r.body);
    assert_eq!(get("/notes?id=eq.1002").json(), json!([]));
}

#[test]
fn max_affected_limits_a_function_result() {
    let strict = [("prefer", "handling=strict, max-affected=1")];
    // (Other tests add tasks: the count in the details varies.)
    let r = write("POST", "/rpc/task_titles", &strict, "{}");
    assert_eq!(
        (r.status, r.json()["code"].as_str(), r.json()["message"].as_str()),
        (400, Some("PGRST124"), Some("Query result exceeds max-affected preference constraint"))
    );
    // PostgREST 13: a function that returns no set cannot be held to max-affected.
    let r = write("POST", "/rpc/add_them", &strict, r#"{"a": 1, "b": 1}"#);
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            serde_json::json!({
                "code": "PGRST128",
                "details": null,
                "hint": null,
                "message": "Function must return SETOF or TABLE when max-affected preference is used with handling=strict"
            })
        )
    );
}

#[test]
fn session_settings_a_function_changes_do_not_leak_into_later_requests() {
    for _ in 0..4 {
        let r = write("POST", "/rpc/leak_search_path", &[], "{}");
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // Every pooled connection that ran the function sets its search_path again.
    for _ in 0..8 {
        assert_eq!(get("/items?id=eq.1&select=name").json(), json!([{"name": "hammer"}]));
    }
}

#[test]
fn odd_bodies_are_answered_not_a_crash() {
    // An array goes whole to a single unnamed json argument; greet has none, so it is called
    // with the array's first object, none here: no arguments (as PostgREST 14).
    let r = write("POST", "/rpc/greet", &[], "[]");
    assert_eq!((r.status, r.body.as_str()), (200, "\"hello\""), "{}", r.body);
    let r = write("POST", "/rpc/greet", &[], "[1]");
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("PGRST102")), "{}", r.body);
    let r = write("POST", "/rpc/echo", &[], "[1, 2]");
    assert_eq!((r.status, r.body.as_str()), (200, "[1, 2]"));
    // An empty form is no arguments.
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let r = crate::support::send_to(&crate::support::harness().base, "POST", "/rpc/greet", &form, Some(""));
    assert_eq!((r.status, r.body.as_str()), (200, "\"hello\""), "{}", r.body);
}

#[test]
fn a_function_of_a_composite_type_answers_its_fields() {
    crate::support::check("/rpc/ret_point", 200, serde_json::json!({"x": 10, "y": 5}));
    crate::support::check("/rpc/ret_points?x=lt.5&select=y", 200, serde_json::json!([{"y": 2}]));
}

#[test]
fn an_argument_given_twice_is_the_last_one() {
    crate::support::check("/rpc/greet?name=ignored&name=world", 200, serde_json::json!("hello world"));
}

#[test]
fn an_array_calls_a_function_with_its_first_object() {
    let r = crate::support::write("POST", "/rpc/add_them", &[], r#"[{"a": 1, "b": 2}, {"a": 4, "b": 6}]"#);
    assert_eq!((r.status, r.body.as_str()), (200, "3"));
}

#[test]
fn an_unnamed_parameter_is_the_empty_key() {
    // As PostgREST 14: postgrest-js's `.rpc('shout', { '': 'hi' })`.
    let r = write("POST", "/rpc/shout", &[], r#"{"": "hi"}"#);
    assert_eq!((r.status, r.body.as_str()), (200, "\"HI\""));
    // An unnamed integer makes `dflt(integer)` uncallable: `()` and `(text)` remain, both
    // callable without arguments.
    let r = write("POST", "/rpc/dflt", &[], "{}");
    assert_eq!(
        (r.status, r.json()),
        (
            300,
            json!({
                "code": "PGRST203",
                "details": null,
                "hint": "Try renaming the parameters or the function itself in the database so function overloading can be resolved",
                "message": "Could not choose the best candidate function between: test.dflt(), test.dflt( => text)"
            })
        )
    );
    let r = write("POST", "/rpc/dflt", &[], r#"{"": "x"}"#);
    assert_eq!((r.status, r.body.as_str()), (200, "\"text\""));
}
