//! CORS as PostgREST answers it by default, and restricted by `server-cors-allowed-origins`.

use crate::support::{default_args, harness, request, request_to, start_server};

#[test]
fn preflight_allows_any_origin_without_the_database() {
    let r = request(
        "OPTIONS",
        "/items",
        &[
            ("Origin", "https://app.example"),
            ("Access-Control-Request-Method", "GET"),
            ("Access-Control-Request-Headers", "apikey, x-client-info"),
        ],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("access-control-allow-headers"), Some("Authorization, apikey, x-client-info"));
    assert_eq!(r.header("access-control-max-age"), Some("86400"));
    assert!(r.header("access-control-allow-methods").unwrap().contains("PATCH"));
    assert_eq!(r.body, "");
}

#[test]
fn responses_expose_postgrest_headers() {
    let r = request("GET", "/items?limit=1", &[("Origin", "https://app.example")]);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    let exposed = r.header("access-control-expose-headers").unwrap();
    for h in ["Content-Range", "Location", "Range-Unit", "Content-Profile", "Preference-Applied"] {
        assert!(exposed.contains(h), "{h} in {exposed}");
    }
    let r = request("GET", "/items?limit=1", &[]);
    assert_eq!(r.header("access-control-allow-origin"), None);
}

#[test]
fn allowed_origins_restrict_cors() {
    let mut args = default_args(&harness().superuser_uri);
    args.server_cors_allowed_origins = Some("https://good.example, https://also.example".into());
    let base = start_server(args);
    let r = request_to(&base, "GET", "/items?limit=1", &[("Origin", "https://good.example")]);
    assert_eq!(r.header("access-control-allow-origin"), Some("https://good.example"));
    assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
    let vary: Vec<&str> = r.headers.get_all("vary").iter().filter_map(|v| v.to_str().ok()).collect();
    assert_eq!(vary, ["Accept, Prefer, Range", "Origin"]);
    let r = request_to(&base, "GET", "/items?limit=1", &[("Origin", "https://evil.example")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
    let r = request_to(
        &base,
        "OPTIONS",
        "/items",
        &[("Origin", "https://evil.example"), ("Access-Control-Request-Method", "GET")],
    );
    assert_eq!(r.header("access-control-allow-origin"), None);
}
