//! End-to-end tests of [`crate::parse`]: how the pieces are wired together.

use crate::*;

fn get(path: &str, query: &str) -> Result<ApiRequest, RequestError> {
    parse(Method::Get, path, query, &[])
}

fn eq(name: &str, v: &str) -> Filter {
    Filter {
        field: Field { name: name.into(), json_path: vec![] },
        negated: false,
        operation: Operation::Compare { op: CompareOp::Eq, quantifier: None, value: v.into() },
    }
}

#[test]
fn defaults() {
    let r = get("/items", "").unwrap();
    assert_eq!(r.target, Target::Relation("items".into()));
    assert_eq!(r.query.select, vec![SelectItem::Star]);
    assert_eq!(r.profile, None);
    assert_eq!(r.range_header, None);
    assert!(r.accept.is_empty());
    assert_eq!(r.preferences, Preferences::default());
}

#[test]
fn query_params_are_classified() {
    let r = get(
        "/films",
        "select=id,actors(*)&id=eq.1&actors.first_name=eq.x&order=id.desc&actors.order=name\
         &limit=10&offset=5&actors.limit=2&or=(a.eq.1,b.eq.2)&actors.not.and=(c.eq.3)\
         &columns=a,b&on_conflict=id&flag&data->>k=eq.v%2Cw",
    )
    .unwrap();
    let q = r.query;
    assert_eq!(q.select.len(), 2);
    assert_eq!(
        q.filters,
        vec![
            (vec![], eq("id", "1")),
            (vec!["actors".into()], eq("first_name", "x")),
            (
                vec![],
                Filter {
                    field: Field {
                        name: "data".into(),
                        json_path: vec![JsonStep { as_text: true, key: JsonKey::Key("k".into()) }],
                    },
                    ..eq("data", "v,w")
                }
            ),
        ]
    );
    assert_eq!(q.order.len(), 2);
    assert_eq!(q.order[1].0, vec!["actors".to_string()]);
    assert_eq!(
        q.ranges,
        vec![
            (vec![], LimitOffset { limit: Some(10), offset: Some(5) }),
            (vec!["actors".into()], LimitOffset { limit: Some(2), offset: None }),
        ]
    );
    assert_eq!(q.logic.len(), 2);
    assert_eq!(q.logic[1].0, vec!["actors".to_string()]);
    assert!(matches!(q.logic[1].1, LogicTree::Expr { negated: true, op: LogicOp::And, .. }));
    assert_eq!(q.columns, Some(vec!["a".into(), "b".into()]));
    assert_eq!(q.on_conflict, Some(vec!["id".into()]));
    assert!(q.rpc_params.is_empty());
}

#[test]
fn plus_is_space() {
    let r = get("/t", "name=eq.a+b").unwrap();
    assert_eq!(r.query.filters, vec![(vec![], eq("name", "a b"))]);
}

#[test]
fn rpc_reads_keep_arguments() {
    let r = get("/rpc/fn", "a=1&b=eq.2&select=x").unwrap();
    assert_eq!(r.target, Target::Rpc("fn".into()));
    assert_eq!(r.query.rpc_params, vec![("a".to_string(), "1".to_string())]);
    assert_eq!(r.query.filters, vec![(vec![], eq("b", "2"))]);
    let r = parse(Method::Head, "/rpc/fn", "a=1", &[]).unwrap();
    assert_eq!(r.query.rpc_params.len(), 1);
    // POST arguments come in the body, so a non-filter in the URL is an error, as in PostgREST.
    assert!(parse(Method::Post, "/rpc/fn", "a=1", &[]).is_err());
    assert!(get("/items", "a=1").is_err());
}

#[test]
fn first_error_wins_in_postgrest_order() {
    let Err(RequestError::Parse { message, details }) = get("/t", "id=bad&order=x.bad") else { panic!() };
    assert_eq!(message, "\"failed to parse order (x.bad)\" (line 1, column 3)");
    assert!(details.contains("expecting"));
    let Err(RequestError::Parse { message, .. }) = get("/t", "select=a,&id=bad") else { panic!() };
    assert_eq!(message, "\"failed to parse select parameter (a,)\" (line 1, column 3)");
}

#[test]
fn messages_escape_like_haskell_show() {
    let Err(RequestError::Parse { message, .. }) = get("/t", "id=b%22%C3%A9") else { panic!() };
    assert_eq!(message, "\"failed to parse filter (b\\\"\\233)\" (line 1, column 1)");
}

#[test]
fn not_found() {
    assert_eq!(get("/a/b", ""), Err(RequestError::NotFound));
}

#[test]
fn profiles() {
    let h = [("accept-profile", "v1"), ("content-profile", "v2")];
    let p = |m| parse(m, "/t", "", &h).unwrap().profile;
    assert_eq!(p(Method::Get), Some("v1".into()));
    assert_eq!(p(Method::Head), Some("v1".into()));
    assert_eq!(p(Method::Options), Some("v1".into()));
    assert_eq!(p(Method::Post), Some("v2".into()));
    assert_eq!(p(Method::Patch), Some("v2".into()));
    assert_eq!(p(Method::Put), Some("v2".into()));
    assert_eq!(p(Method::Delete), Some("v2".into()));
}

#[test]
fn range_header() {
    let h = [("range", "0-9")];
    let r = parse(Method::Get, "/t", "", &h).unwrap();
    assert_eq!(r.range_header, Some(RowRange { first: 0, last: Some(9) }));
    // Other methods ignore it, as RFC 9110 and PostgREST do.
    let r = parse(Method::Head, "/t", "", &h).unwrap();
    assert_eq!(r.range_header, None);
    let bad = [("range", "9-1")];
    assert!(matches!(parse(Method::Get, "/t", "", &bad), Err(RequestError::InvalidRange { .. })));
    assert!(parse(Method::Delete, "/t", "", &bad).is_ok());
    let far = [("range", "20-30")];
    assert!(matches!(parse(Method::Get, "/t", "limit=5", &far), Err(RequestError::InvalidRange { .. })));
    assert!(parse(Method::Get, "/t", "limit=0", &far).is_ok());
}

#[test]
fn limits() {
    assert!(get("/t", "limit=abc").unwrap().query.ranges.is_empty());
    assert!(matches!(get("/t", "limit=-1"), Err(RequestError::InvalidRange { .. })));
    assert_eq!(
        get("/t", "limit=0").unwrap().query.ranges,
        vec![(vec![], LimitOffset { limit: Some(0), offset: None })]
    );
}

#[test]
fn headers() {
    let h = [
        ("prefer", "return=minimal"),
        ("prefer", "count=exact, bogus"),
        ("accept", "text/csv;q=0.5, application/json"),
    ];
    let r = parse(Method::Post, "/t", "", &h).unwrap();
    assert_eq!(r.preferences.return_, Some(PreferReturn::Minimal));
    assert_eq!(r.preferences.count, Some(PreferCount::Exact));
    assert_eq!(r.preferences.invalid, vec!["bogus".to_string()]);
    assert_eq!(r.accept, vec![MediaType::Json, MediaType::Csv]);
}

#[test]
fn reserved_keys_without_value() {
    // `select` without `=` means no select parameter at all: the default `*`.
    let r = get("/t", "select&columns").unwrap();
    assert_eq!(r.query.select, vec![SelectItem::Star]);
    assert_eq!(r.query.columns, None);
    let r = get("/t", "select=").unwrap();
    assert!(r.query.select.is_empty());
}

#[test]
fn hostile_inputs_do_not_panic() {
    let long = "(".repeat(100_000);
    let inputs = [
        long.as_str(),
        "%",
        "%%%",
        "\u{0}",
        "a=\u{FFFF}",
        "or=(((((",
        "select=a(b(c(d(",
        "x=in.(\"",
        "order=a(",
        "a.b.c.=eq.1",
        "=eq.1",
        "not.or=",
    ];
    for q in inputs {
        let _ = get("/t", q);
        let _ = get("/rpc/f", q);
        let _ = get("/t", &format!("select={q}&or={q}&order={q}&x={q}&columns={q}"));
    }
}
