//! JWT authentication over HTTP ("Authentication" in the PostgREST docs): the token's role
//! runs the query and its claims reach row-level security.

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::support::{request, JWT_SECRET};

fn token(claims: Value) -> String {
    let t = encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(JWT_SECRET.as_bytes()));
    format!("Bearer {}", t.unwrap())
}

#[test]
fn the_token_role_reads_what_it_is_granted() {
    let r = request("GET", "/secrets", &[("Authorization", &token(json!({"role": "web_user"})))]);
    assert_eq!((r.status, r.json()), (200, json!([{"id": 1, "secret": "the cake is a lie"}])));
}

#[test]
fn rls_sees_the_sub_claim() {
    let alice = token(json!({"role": "web_user", "sub": "alice"}));
    let r = request("GET", "/documents?select=id&order=id", &[("Authorization", &alice)]);
    assert_eq!(r.json(), json!([{"id": 1}, {"id": 2}, {"id": 4}]));
    let bob = token(json!({"role": "web_user", "sub": "bob"}));
    let r = request("GET", "/documents?select=id&order=id", &[("Authorization", &bob)]);
    assert_eq!(r.json(), json!([{"id": 1}, {"id": 3}, {"id": 4}]));
}

#[test]
fn an_authenticated_role_without_a_grant_is_403() {
    let r = request("GET", "/anon_only", &[("Authorization", &token(json!({"role": "web_user"})))]);
    assert_eq!(r.status, 403);
    assert_eq!(r.header("www-authenticate"), None);
    assert_eq!(r.json()["code"], "42501");
}

#[test]
fn an_expired_token_is_401_with_www_authenticate() {
    let r = request("GET", "/items", &[("Authorization", &token(json!({"role": "web_user", "exp": 1000})))]);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer error="invalid_token", error_description="JWT expired""#)
    );
    assert_eq!(
        r.json(),
        json!({"code": "PGRST303", "details": null, "hint": null, "message": "JWT expired"})
    );
}

/// Serves `body` to every request on a loopback port, as an identity provider's JWKS endpoint.
fn serve_jwks(body: String) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/.well-known/jwks.json", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body.as_bytes()));
        }
    });
    url
}

#[test]
fn keys_from_a_jwks_url() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys");
    let signing = EncodingKey::from_rsa_pem(&std::fs::read(dir.join("rsa.key")).unwrap()).unwrap();
    let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&signing, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some("provider-1".into());
    let url = serve_jwks(json!({ "keys": [jwk] }).to_string());

    let mut args = crate::support::default_args(&crate::support::harness().superuser_uri);
    args.jwt_secret = None;
    args.jwt_jwks_url = Some(url);
    let base = crate::support::start_server(args);

    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("provider-1".into());
    let token = encode(&header, &json!({"role": "web_user"}), &signing).unwrap();
    let bearer = format!("Bearer {token}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let r = loop {
        let r = crate::support::request_to(&base, "GET", "/secrets", &[("Authorization", &bearer)]);
        if r.status == 200 || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{}", r.body);

    header.kid = Some("unknown".into());
    let other = encode(&header, &json!({"role": "web_user"}), &signing).unwrap();
    let r = crate::support::request_to(
        &base,
        "GET",
        "/secrets",
        &[("Authorization", &format!("Bearer {other}"))],
    );
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("PGRST301")));
}

#[test]
fn tokens_that_do_not_verify_are_pgrst301_in_postgrest_13s_words() {
    let wrong_secret = encode(
        &Header::new(Algorithm::HS256),
        &json!({"role": "web_user"}),
        &EncodingKey::from_secret(b"another secret, long enough for HS256"),
    )
    .unwrap();
    for (authorization, message) in [
        (format!("Bearer {wrong_secret}"), "No suitable key or wrong key type"),
        (
            "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.bm90IGFuIG9iamVjdA".into(),
            "Expected 3 parts in JWT; got 2",
        ),
        (
            "Bearer quifquirndsjagnrgniur.fonvoienqhhdj.iuqvnvhojah".into(),
            "JWT cryptographic operation failed",
        ),
        (
            "Bearer eyJ0eXAiOiJKV1QiLCJhbGciOiJub25lIn0.e30.yOBhlOIqn56T-4NvyEXCjfi3UmyQZ-BzXtePMO2NgRI"
                .into(),
            "Wrong or unsupported encoding algorithm",
        ),
        ("Bearer ".into(), "Empty JWT is sent in Authorization header"),
    ] {
        let r = request("GET", "/items?select=id&id=eq.1", &[("Authorization", &authorization)]);
        assert_eq!(
            (r.status, r.json()),
            (401, json!({"code": "PGRST301", "details": null, "hint": null, "message": message})),
            "{authorization}"
        );
    }
}

#[test]
fn tokens_whose_claims_refuse_them_are_pgrst303() {
    for (claims, message) in [
        (json!({"role": "web_user", "nbf": 9_999_999_999u64}), "JWT not yet valid"),
        (json!({"role": "web_user", "iat": 9_999_999_999u64}), "JWT issued at future"),
        (json!({"role": "web_user", "exp": "soon"}), "The JWT 'exp' claim must be a number"),
    ] {
        let r = request("GET", "/items?select=id&id=eq.1", &[("Authorization", &token(claims))]);
        assert_eq!(
            (r.status, r.json()),
            (401, json!({"code": "PGRST303", "details": null, "hint": null, "message": message}))
        );
    }
}
