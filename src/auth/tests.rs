//! Token verification as PostgREST's docs describe it ("Authentication"), without a database.

use base64::Engine;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::*;
use crate::config::{Config, ServeArgs};

const SECRET: &str = "reallyreallyreallyreallyverysafe";
const NOW: u64 = 1_800_000_000;

fn keys_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys")
}

fn authenticator(secret: &str, tweak: impl FnOnce(&mut ServeArgs)) -> Authenticator {
    let mut args = ServeArgs {
        db_uri: Some("postgres://a@localhost/db".into()),
        db_anon_role: Some("web_anon".into()),
        jwt_secret: Some(secret.into()),
        ..ServeArgs::default()
    };
    tweak(&mut args);
    Authenticator::new(&Config::load(&args).expect("config"))
}

fn hs256(claims: Value) -> String {
    encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(SECRET.as_bytes())).unwrap()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn jwt_error(r: Result<Principal, Error>) -> String {
    match r {
        Err(e @ (Error::Jwt(_) | Error::JwtClaims(_) | Error::JwtSignature | Error::JwtExpired)) => {
            e.to_string()
        }
        other => panic!("expected a JWT error, got {other:?}"),
    }
}

#[test]
fn no_token_is_the_anonymous_role() {
    let auth = authenticator(SECRET, |_| {});
    for header in [None, Some("Basic dXNlcjpwYXNz")] {
        let p = auth.authenticate_at(header, NOW).unwrap();
        assert_eq!((&*p.role, &*p.claims, p.anonymous), ("web_anon", r#"{"role":"web_anon"}"#, true));
    }
    // PostgREST 13: a bearer scheme without its token is an error, not anonymous.
    for header in ["Bearer", "Bearer "] {
        assert_eq!(
            jwt_error(auth.authenticate_at(Some(header), NOW)),
            "Empty JWT is sent in Authorization header"
        );
    }
}

#[test]
fn the_role_and_claims_come_from_the_token() {
    let auth = authenticator(SECRET, |_| {});
    let token = hs256(json!({"role": "web_user", "sub": "alice", "exp": NOW + 60}));
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let p = auth.authenticate_at(Some(&format!("{scheme} {token}")), NOW).unwrap();
        assert_eq!(&*p.role, "web_user");
        assert!(!p.anonymous);
        let claims: Value = serde_json::from_str(&p.claims).unwrap();
        assert_eq!(claims["sub"], "alice");
    }
    // Without a role claim the anonymous role is used, with the token's claims.
    let p = auth.authenticate_at(Some(&bearer(&hs256(json!({"sub": "bob"})))), NOW).unwrap();
    assert_eq!((&*p.role, p.anonymous), ("web_anon", true));
}

#[test]
fn time_claims_allow_30_seconds_of_skew() {
    let auth = authenticator(SECRET, |a| a.jwt_cache_max_entries = Some(0));
    let at = |claims: Value| auth.authenticate_at(Some(&bearer(&hs256(claims))), NOW);
    assert!(at(json!({"role": "web_user", "exp": NOW - 29})).is_ok());
    assert_eq!(jwt_error(at(json!({"role": "web_user", "exp": NOW - 31}))), "JWT expired");
    assert!(at(json!({"role": "web_user", "nbf": NOW + 29})).is_ok());
    assert_eq!(jwt_error(at(json!({"role": "web_user", "nbf": NOW + 31}))), "JWT not yet valid");
    assert_eq!(jwt_error(at(json!({"role": "web_user", "iat": NOW + 31}))), "JWT issued at future");
    assert!(jwt_error(at(json!({"role": "web_user", "exp": "soon"}))).contains("'exp'"));
}

#[test]
fn a_cached_token_expires() {
    let auth = authenticator(SECRET, |_| {});
    let header = bearer(&hs256(json!({"role": "web_user", "exp": NOW + 10})));
    assert!(auth.authenticate_at(Some(&header), NOW).is_ok());
    assert!(auth.authenticate_at(Some(&header), NOW + 40).is_ok_and(|p| &*p.role == "web_user"));
    assert_eq!(jwt_error(auth.authenticate_at(Some(&header), NOW + 41)), "JWT expired");
}

#[test]
fn bad_tokens_are_refused_not_crashed_on() {
    let auth = authenticator(SECRET, |_| {});
    let good = hs256(json!({"role": "web_user"}));
    let (head, rest) = good.split_once('.').unwrap();
    let (payload, _) = rest.split_once('.').unwrap();
    let none_header = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0"; // {"alg":"none","typ":"JWT"}
    let other_key = encode(
        &Header::new(Algorithm::HS256),
        &json!({"role": "postgres"}),
        &EncodingKey::from_secret(&[7; 32]),
    )
    .unwrap();
    let cases = [
        format!("{none_header}.{payload}."),
        format!("{head}.{payload}.AAAA"),
        other_key,
        "abc".into(),
        "not.a.jwt".into(),
        format!("{head}.!!!.sig"),
        format!("{}.{payload}.x", "A".repeat(20_000)),
        "a.b.c.d".into(),
    ];
    for token in cases {
        let e = jwt_error(auth.authenticate_at(Some(&bearer(&token)), NOW));
        assert!(!e.is_empty());
    }
    assert_eq!(jwt_error(auth.authenticate_at(Some("Bearer abc"), NOW)), "Expected 3 parts in JWT; got 1");
    // HS384 signed with the right secret is fine; the same token claiming RS256 is not.
    let hs384 = encode(
        &Header::new(Algorithm::HS384),
        &json!({"role": "web_user"}),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    assert!(auth.authenticate_at(Some(&bearer(&hs384)), NOW).is_ok());
}

#[test]
fn audience_is_checked_when_configured() {
    let auth = authenticator(SECRET, |a| a.jwt_aud = Some("rowgate".into()));
    let at = |claims: Value| auth.authenticate_at(Some(&bearer(&hs256(claims))), NOW);
    assert!(at(json!({"role": "web_user", "aud": "rowgate"})).is_ok());
    assert!(at(json!({"role": "web_user", "aud": ["x", "rowgate"]})).is_ok());
    assert!(at(json!({"role": "web_user"})).is_ok());
    assert_eq!(jwt_error(at(json!({"role": "web_user", "aud": "other"}))), "JWT not in audience");
}

#[test]
fn role_claim_key_follows_a_path() {
    let auth = authenticator(SECRET, |a| a.jwt_role_claim_key = Some(".app.roles[1]".into()));
    let p = auth
        .authenticate_at(Some(&bearer(&hs256(json!({"app": {"roles": ["x", "web_user"]}})))), NOW)
        .unwrap();
    assert_eq!(&*p.role, "web_user");
}

#[test]
fn base64_secrets() {
    let encoded = base64::engine::general_purpose::STANDARD.encode(SECRET);
    let auth = authenticator(&encoded, |a| a.jwt_secret_is_base64 = Some(true));
    assert!(auth.authenticate_at(Some(&bearer(&hs256(json!({"role": "web_user"})))), NOW).is_ok());
}

#[test]
fn public_keys_as_pem_jwk_and_jwks() {
    let dir = keys_dir();
    for (name, alg) in [("rsa", Algorithm::RS256), ("ec", Algorithm::ES256), ("ed", Algorithm::EdDSA)] {
        let private = std::fs::read(dir.join(format!("{name}.key"))).unwrap();
        let signing = match name {
            "rsa" => EncodingKey::from_rsa_pem(&private),
            "ec" => EncodingKey::from_ec_pem(&private),
            _ => EncodingKey::from_ed_pem(&private),
        }
        .unwrap();
        let mut header = Header::new(alg);
        header.kid = Some(format!("{name}-1"));
        let token = encode(&header, &json!({"role": "web_user"}), &signing).unwrap();

        // PEM from a file (`@path`).
        let pem = format!("@{}", dir.join(format!("{name}.pub")).display());
        let auth = authenticator(&pem, |_| {});
        assert!(auth.authenticate_at(Some(&bearer(&token)), NOW).is_ok(), "{name} PEM");

        // A JWK, and a JWKS with a decoy key first (matched by kid).
        let jwk_text = if name == "ed" {
            // jsonwebtoken cannot derive an Ed25519 JWK; the key is the SPKI's last 32 bytes.
            let pem = std::fs::read_to_string(dir.join("ed.pub")).unwrap();
            let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
            let der = base64::engine::general_purpose::STANDARD.decode(body).unwrap();
            let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&der[der.len() - 32..]);
            json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "ed-1", "alg": "EdDSA"}).to_string()
        } else {
            let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&signing, alg).unwrap();
            jwk.common.key_id = Some(format!("{name}-1"));
            serde_json::to_string(&jwk).unwrap()
        };
        assert!(
            authenticator(&jwk_text, |_| {}).authenticate_at(Some(&bearer(&token)), NOW).is_ok(),
            "{name} JWK"
        );
        let decoy = json!({"kty": "oct", "kid": "decoy", "k": "cmVhbGx5cmVhbGx5cmVhbGx5cmVhbGx5dmVyeXNhZmU"});
        let jwks = format!(r#"{{"keys": [{decoy}, {jwk_text}]}}"#);
        assert!(
            authenticator(&jwks, |_| {}).authenticate_at(Some(&bearer(&token)), NOW).is_ok(),
            "{name} JWKS"
        );

        // An HMAC token signed with the public key's text must not pass (algorithm confusion).
        let forged = encode(
            &Header::new(Algorithm::HS256),
            &json!({"role": "postgres"}),
            &EncodingKey::from_secret(&std::fs::read(dir.join(format!("{name}.pub"))).unwrap()),
        )
        .unwrap();
        assert!(auth.authenticate_at(Some(&bearer(&forged)), NOW).is_err(), "{name} alg confusion");
    }
}

#[test]
fn bad_secrets_stop_start_up() {
    for (secret, base64) in
        [("short", false), ("{\"keys\": []}", false), ("-----BEGIN nonsense", false), ("%%%", true)]
    {
        let args = ServeArgs {
            db_uri: Some("postgres://a@localhost/db".into()),
            jwt_secret: Some(secret.into()),
            jwt_secret_is_base64: Some(base64),
            ..ServeArgs::default()
        };
        let e = Config::load(&args).unwrap_err().to_string();
        assert!(e.starts_with("invalid jwt-secret: "), "{e}");
    }
}

#[test]
fn no_secret_is_pgrst300() {
    let args = ServeArgs {
        db_uri: Some("postgres://a@localhost/db".into()),
        db_anon_role: Some("web_anon".into()),
        ..ServeArgs::default()
    };
    let auth = Authenticator::new(&Config::load(&args).unwrap());
    let r = auth.authenticate_at(Some(&bearer(&hs256(json!({"role": "x"})))), NOW);
    assert!(matches!(&r, Err(e) if e.code() == "PGRST300"), "{r:?}");
}

#[test]
fn a_role_postgresql_takes_for_reset_role_is_refused() {
    // `SET role = 'none'` is RESET ROLE: the request would run as the authenticator.
    let auth = authenticator(SECRET, |_| {});
    for role in ["none", "NONE", "None"] {
        let e = jwt_error(auth.authenticate_at(Some(&bearer(&hs256(json!({"role": role})))), NOW));
        assert!(e.contains("is not a role requests may run as"), "{role}: {e}");
    }
}
