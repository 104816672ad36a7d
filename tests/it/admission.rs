//! One identification and one admission for every service: the API key `api-key-required`
//! asks for, and the role's rate limit (`rate-limit-roles`), hold for the REST API, storage,
//! realtime's socket and broadcast, and `/auth/v1` alike — each saying so in its own API's shape.

use serde_json::{json, Value};

use crate::support::send_to;

/// A server with every service, an API key required and the anonymous role's requests limited
/// to 3 a minute, whatever the service.
fn server() -> String {
    let dir = tempfile::tempdir().unwrap().keep();
    crate::sqlite::serve_sqlite(
        &dir.join("admission.db"),
        "CREATE TABLE notes (id INTEGER PRIMARY KEY);",
        "[notes]\nselect = { anon = \"true\" }\n",
        rowgate::config::ServeArgs {
            api_key_required: Some(true),
            rate_limit_roles: Some("anon=3/min".into()),
            accounts_enabled: Some(true),
            storage_enabled: Some(true),
            storage_dir: Some(dir.join("storage")),
            realtime_enabled: Some(true),
            ..Default::default()
        },
    )
}

/// Each service once, with `headers`: (service, status, body).
fn every_service(base: &str, headers: &[(&str, &str)]) -> Vec<(&'static str, u16, Value)> {
    let with_json = |extra: &[(&'static str, &'static str)]| {
        let mut h: Vec<(&str, &str)> = headers.to_vec();
        h.extend_from_slice(extra);
        h
    };
    let json_body = [("content-type", "application/json")];
    let calls: [(&str, &str, &str, Option<&str>); 5] = [
        ("rest", "GET", "/rest/v1/notes", None),
        ("storage", "GET", "/storage/v1/bucket", None),
        ("auth", "POST", "/auth/v1/signup", Some(r#"{"email": "a@example.com", "password": "secret-a"}"#)),
        ("broadcast", "POST", "/realtime/v1/api/broadcast", Some(r#"{"messages": []}"#)),
        ("websocket", "GET", "/realtime/v1/websocket?vsn=1.0.0", None),
    ];
    calls
        .into_iter()
        .map(|(service, method, path, body)| {
            let r = send_to(base, method, path, &with_json(&json_body), body);
            (service, r.status, serde_json::from_str(&r.body).unwrap_or(Value::String(r.body)))
        })
        .collect()
}

#[test]
fn every_service_requires_the_api_key_and_shares_the_role_s_rate_limit() {
    let base = server();
    let anon = crate::storage::token(json!({"role": "anon"}));
    let bearer = format!("Bearer {anon}");
    // Without the key, each service refuses, in its API's shape.
    let refused = every_service(&base, &[("authorization", &bearer)]);
    assert_eq!(
        refused,
        vec![
            (
                "rest",
                401,
                json!({"code": "RG010", "details": null, "hint": null, "message": "API key required"})
            ),
            (
                "storage",
                400,
                json!({"statusCode": "403", "code": "AccessDenied", "error": "Unauthorized", "message": "API key required"})
            ),
            ("auth", 401, json!({"code": 401, "error_code": "no_authorization", "msg": "API key required"})),
            ("broadcast", 401, json!({"message": "Unauthorized", "error": "API key required"})),
            ("websocket", 401, json!({"message": "Unauthorized", "error": "API key required"})),
        ]
    );
    // With it, the anonymous role has 3 requests a minute, over all the services together.
    let keyed = [("apikey", anon.as_str()), ("authorization", bearer.as_str())];
    let answers = every_service(&base, &keyed);
    let statuses: Vec<(&str, u16)> = answers.iter().map(|(s, status, _)| (*s, *status)).collect();
    // (Storage refuses the listing itself: the rules give the anonymous role no bucket.)
    assert_eq!(
        statuses,
        [("rest", 200), ("storage", 400), ("auth", 200), ("broadcast", 429), ("websocket", 429)]
    );
    assert_eq!(answers[1].2["statusCode"], "403");
    let answers = every_service(&base, &keyed);
    let statuses: Vec<(&str, u16)> = answers.iter().map(|(s, status, _)| (*s, *status)).collect();
    assert_eq!(
        statuses,
        [("rest", 429), ("storage", 429), ("auth", 429), ("broadcast", 429), ("websocket", 429)]
    );
    assert_eq!(answers[1].2["statusCode"], "429");
    assert_eq!(answers[2].2["error_code"], "over_request_rate_limit");
}

/// What a browser opens from a mail or a provider's redirect carries no API key: it is let in to
/// answer (a redirect, or its own error), while the rest of `/auth/v1` still asks for the key.
#[test]
fn links_a_browser_opens_need_no_api_key() {
    let base = server();
    let follow_none = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let get = |path: &str| {
        let r = follow_none.get(format!("{base}{path}")).send().expect("a response");
        let location = r.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        (r.status().as_u16(), location)
    };
    let (status, location) = get("/auth/v1/verify?token=expired&type=signup");
    assert_eq!(status, 303);
    assert!(location.contains("error_code=otp_expired"), "{location}");
    let (status, location) = get("/auth/v1/callback?state=forged&code=x");
    assert_eq!(status, 303);
    assert!(location.contains("error_code=bad_oauth_state"), "{location}");
    assert_eq!(get("/auth/v1/authorize?provider=none").0, 400);
    assert_eq!(get("/auth/v1/user").0, 401);
}
