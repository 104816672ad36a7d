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
        json!({"code": "PGRST301", "details": null, "hint": null, "message": "JWT expired"})
    );
}
