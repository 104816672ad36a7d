//! What PostgREST's "Observability" page promises a request carries back: the trace header and
//! `Server-Timing`.

use crate::support::{default_args, harness, request_to, start_server};

#[test]
fn the_trace_header_comes_back_error_or_not() {
    let mut args = default_args(&harness().superuser_uri);
    args.server_trace_header = Some("X-Request-Id".into());
    let base = start_server(args);
    for path in ["/items?id=eq.1&select=id", "/itemz"] {
        let r = request_to(&base, "GET", path, &[("X-Request-Id", "req-42")]);
        assert_eq!(r.header("x-request-id"), Some("req-42"), "{path}");
    }
    let r = request_to(&base, "GET", "/items?id=eq.1&select=id", &[]);
    assert_eq!(r.header("x-request-id"), None);
}

#[test]
fn server_timing_names_each_stage() {
    let mut args = default_args(&harness().superuser_uri);
    args.server_timing_enabled = Some(true);
    let base = start_server(args);
    let r = request_to(&base, "GET", "/items?id=eq.1&select=id", &[]);
    let timing = r.header("server-timing").expect("Server-Timing");
    let names: Vec<&str> = timing.split(", ").map(|m| m.split(";dur=").next().unwrap()).collect();
    assert_eq!(names, ["jwt", "parse", "plan", "transaction", "response"], "{timing}");
    assert!(timing.split(", ").all(|m| m.split(";dur=").nth(1).is_some_and(|d| d.parse::<f64>().is_ok())));
    assert_eq!(request_to(&base, "GET", "/itemz", &[]).header("server-timing"), None);
}

#[test]
fn metrics_carry_postgrest_names() {
    let base = start_server(default_args(&harness().superuser_uri));
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &serde_json::json!({"role": "web_user"}),
        &jsonwebtoken::EncodingKey::from_secret(crate::support::JWT_SECRET.as_bytes()),
    )
    .unwrap();
    for _ in 0..2 {
        request_to(
            &base,
            "GET",
            "/items?id=eq.1&select=id",
            &[("Authorization", &format!("Bearer {token}"))],
        );
    }
    let metrics = request_to(&base, "GET", "/rowgate/metrics", &[]).body;
    let value = |name: &str| {
        metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
    };
    assert_eq!(
        value("pgrst_db_pool_max"),
        default_args(&harness().superuser_uri).db_pool.map(|n| n as f64),
        "{metrics}"
    );
    assert_eq!(value("pgrst_db_pool_timeouts_total"), Some(0.0));
    assert_eq!(value("pgrst_schema_cache_loads_total{status=\"SUCCESS\"}"), Some(1.0));
    assert_eq!(value("pgrst_schema_cache_loads_total{status=\"FAIL\"}"), Some(0.0));
    assert!(value("pgrst_schema_cache_query_time_seconds").is_some_and(|s| s > 0.0));
    assert_eq!(
        (value("pgrst_jwt_cache_requests_total"), value("pgrst_jwt_cache_hits_total")),
        (Some(2.0), Some(1.0))
    );
    assert_eq!(value("pgrst_jwt_cache_evictions_total"), Some(0.0));
}
