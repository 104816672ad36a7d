//! Second factors, on both backends: TOTP factors enrolled, challenged and verified with the
//! code an authenticator app computes; a verified session's tokens say `aal2`, which row-level
//! security (PostgreSQL) and the rules (SQLite) can require; adding or removing a verified
//! factor takes such a session. WebAuthn factors' ceremonies, and what bad answers get (the
//! whole ceremony with a software authenticator is tests/js/auth.test.mjs's).

use serde_json::{json, Value};
use totp_rs::{Algorithm, Secret, TOTP};

use crate::accounts::{auth, claims_of, on_both, postgres, sqlite};
use crate::support::{request_to, send_to};

on_both!(a_totp_factor_raises_a_session_to_aal2);
on_both!(a_webauthn_factor_asks_for_a_registration_then_refuses_what_is_not_one);

fn call(base: &str, method: &str, path: &str, bearer: &str, body: Value) -> (u16, Value) {
    let authorization = format!("Bearer {bearer}");
    let r = send_to(
        base,
        method,
        path,
        &[("content-type", "application/json"), ("authorization", &authorization)],
        Some(&body.to_string()),
    );
    let v = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, v)
}

/// What an authenticator app shows now for `secret` (base32).
fn code(secret: &str) -> String {
    let bytes = Secret::Encoded(secret.to_owned()).to_bytes().expect("a base32 secret");
    TOTP::new(Algorithm::SHA1, 6, 1, 30, bytes, None, String::new())
        .expect("a TOTP")
        .generate_current()
        .expect("now")
}

fn access(session: &Value) -> String {
    session["access_token"].as_str().expect("an access token").to_owned()
}

fn vault(base: &str, token: &str) -> Value {
    let r = request_to(base, "GET", "/vault?select=secret", &[("authorization", &format!("Bearer {token}"))]);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn a_totp_factor_raises_a_session_to_aal2(base: &str) {
    let port = base.rsplit(':').next().unwrap_or("0");
    let email = format!("uma-{port}@example.com");
    let (_, session) = auth(base, "/auth/v1/signup", json!({"email": email, "password": "secret-uma"}));
    let aal1 = access(&session);
    assert_eq!(claims_of(&aal1)["aal"], json!("aal1"));
    assert_eq!(vault(base, &aal1), json!([]), "the vault needs a second factor");

    let (status, e) = call(base, "POST", "/auth/v1/factors", &aal1, json!({"factor_type": "phone"}));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("mfa_phone_enroll_not_enabled")));
    let (status, enrolled) = call(
        base,
        "POST",
        "/auth/v1/factors",
        &aal1,
        json!({"factor_type": "totp", "friendly_name": "phone"}),
    );
    assert_eq!(
        (status, &enrolled["type"], &enrolled["friendly_name"]),
        (200, &json!("totp"), &json!("phone"))
    );
    let secret = enrolled["totp"]["secret"].as_str().unwrap().to_owned();
    let uri = enrolled["totp"]["uri"].as_str().unwrap();
    assert!(uri.starts_with("otpauth://totp/") && uri.contains(&format!("secret={secret}")), "{uri}");
    assert!(enrolled["totp"]["qr_code"].as_str().unwrap().starts_with("data:image/svg+xml;utf-8,"));
    let factor = enrolled["id"].as_str().unwrap().to_owned();
    let (status, e) = call(
        base,
        "POST",
        "/auth/v1/factors",
        &aal1,
        json!({"factor_type": "totp", "friendly_name": "phone"}),
    );
    assert_eq!((status, e["error_code"].as_str()), (422, Some("mfa_factor_name_conflict")));
    let (_, user) = call(base, "GET", "/auth/v1/user", &aal1, Value::Null);
    assert_eq!(
        (&user["factors"][0]["id"], &user["factors"][0]["status"]),
        (&json!(factor), &json!("unverified"))
    );

    let (status, challenge) =
        call(base, "POST", &format!("/auth/v1/factors/{factor}/challenge"), &aal1, json!({}));
    assert_eq!((status, &challenge["type"]), (200, &json!("totp")), "{challenge}");
    let challenge_id = challenge["id"].as_str().unwrap().to_owned();
    let wrong = if code(&secret) == "000000" { "111111" } else { "000000" };
    let verify = format!("/auth/v1/factors/{factor}/verify");
    let (status, e) =
        call(base, "POST", &verify, &aal1, json!({"challenge_id": challenge_id, "code": wrong}));
    assert_eq!(
        (status, e),
        (
            422,
            json!({"code": 422, "error_code": "mfa_verification_failed", "msg": "Invalid TOTP code entered"})
        )
    );
    let (status, raised) =
        call(base, "POST", &verify, &aal1, json!({"challenge_id": challenge_id, "code": code(&secret)}));
    assert_eq!(status, 200, "{raised}");
    let aal2 = access(&raised);
    let claims = claims_of(&aal2);
    assert_eq!((&claims["aal"], &claims["amr"][0]["method"]), (&json!("aal2"), &json!("totp")), "{claims}");
    assert_eq!(claims["amr"][1]["method"], "password", "the first factor is kept");
    assert_eq!(claims["session_id"], claims_of(&aal1)["session_id"], "the same session, raised");
    assert_eq!(raised["user"]["factors"][0]["status"], json!("verified"));
    assert_eq!(vault(base, &aal2), json!([{"secret": "the combination"}]));
    // A challenge is answered once.
    let (status, e) =
        call(base, "POST", &verify, &aal1, json!({"challenge_id": challenge_id, "code": code(&secret)}));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("mfa_factor_not_found")));
    // The session stays raised when refreshed.
    let (status, renewed) = auth(
        base,
        "/auth/v1/token?grant_type=refresh_token",
        json!({"refresh_token": raised["refresh_token"]}),
    );
    assert_eq!((status, &claims_of(&access(&renewed))["aal"]), (200, &json!("aal2")), "{renewed}");

    // A new sign-in is aal1 again, and may neither add nor remove a factor.
    let (_, login) =
        auth(base, "/auth/v1/token?grant_type=password", json!({"email": email, "password": "secret-uma"}));
    let other = access(&login);
    assert_eq!(claims_of(&other)["aal"], json!("aal1"));
    assert_eq!(login["user"]["factors"][0]["status"], json!("verified"));
    let (status, e) =
        call(base, "POST", "/auth/v1/factors", &other, json!({"factor_type": "totp", "friendly_name": "b"}));
    assert_eq!((status, e["error_code"].as_str()), (403, Some("insufficient_aal")));
    let (status, e) = call(base, "DELETE", &format!("/auth/v1/factors/{factor}"), &other, Value::Null);
    assert_eq!((status, e["error_code"].as_str()), (422, Some("insufficient_aal")));

    let renewed_access = access(&renewed);
    let (status, gone) =
        call(base, "DELETE", &format!("/auth/v1/factors/{factor}"), &renewed_access, Value::Null);
    assert_eq!((status, gone), (200, json!({"id": factor})));
    let (status, after) = auth(
        base,
        "/auth/v1/token?grant_type=refresh_token",
        json!({"refresh_token": renewed["refresh_token"]}),
    );
    assert_eq!((status, &claims_of(&access(&after))["aal"]), (200, &json!("aal1")), "{after}");
    let (_, user) = call(base, "GET", "/auth/v1/user", &other, Value::Null);
    assert_eq!(user.get("factors"), None, "{user}");
}

fn a_webauthn_factor_asks_for_a_registration_then_refuses_what_is_not_one(base: &str) {
    let port = base.rsplit(':').next().unwrap_or("0");
    let email = format!("wes-{port}@example.com");
    let (_, session) = auth(base, "/auth/v1/signup", json!({"email": email, "password": "secret-wes"}));
    let token = access(&session);
    let (status, enrolled) = call(
        base,
        "POST",
        "/auth/v1/factors",
        &token,
        json!({"factor_type": "webauthn", "friendly_name": ""}),
    );
    assert_eq!(status, 200, "{enrolled}");
    let id = enrolled["id"].as_str().expect("an id").to_owned();
    assert_eq!(enrolled, json!({"id": id, "type": "webauthn", "friendly_name": ""}));

    let (status, challenge) =
        call(base, "POST", &format!("/auth/v1/factors/{id}/challenge"), &token, json!({}));
    assert_eq!(status, 200, "{challenge}");
    assert_eq!((&challenge["type"], &challenge["webauthn"]["type"]), (&json!("webauthn"), &json!("create")));
    let options = &challenge["webauthn"]["credential_options"]["publicKey"];
    // The relying party is the site's host (accounts-site-url: http://localhost:3000 here), the
    // user its account, by id (the UUID's bytes) and address.
    assert_eq!(options["rp"], json!({"name": "localhost", "id": "localhost"}));
    assert_eq!(options["user"]["name"], json!(email));
    assert_eq!(options["attestation"], json!("none"));
    assert!(options["challenge"].as_str().is_some_and(|c| c.len() >= 22), "{options}");

    let verify = |body: Value| call(base, "POST", &format!("/auth/v1/factors/{id}/verify"), &token, body);
    let challenge_id = challenge["id"].as_str().expect("a challenge id");
    for (body, status, code, msg) in [
        (json!({"challenge_id": challenge_id}), 400, "validation_failed", "WebAuthn config required"),
        (
            json!({"challenge_id": challenge_id, "webauthn": {"type": "sign"}}),
            400,
            "validation_failed",
            "WebAuthn type must be create or request",
        ),
        (
            json!({"challenge_id": challenge_id, "webauthn": {"type": "create"}}),
            400,
            "validation_failed",
            "credential_response required",
        ),
        (
            json!({"challenge_id": challenge_id, "webauthn": {"type": "create", "credential_response": {"id": 1}}}),
            400,
            "validation_failed",
            "Invalid credential_response",
        ),
        (
            json!({"challenge_id": "00000000-0000-4000-8000-000000000000", "webauthn": {"type": "create", "credential_response": {}}}),
            422,
            "mfa_factor_not_found",
            "MFA factor with the provided challenge ID not found",
        ),
    ] {
        let (got, e) = verify(body.clone());
        assert_eq!((got, &e["error_code"], &e["msg"]), (status, &json!(code), &json!(msg)), "{body}");
    }
    // An unverified factor's challenge is a registration: an assertion does not answer it.
    let (got, e) = verify(
        json!({"challenge_id": challenge_id, "webauthn": {"type": "request", "credential_response": {}}}),
    );
    assert_eq!((got, &e["error_code"]), (422, &json!("mfa_verification_failed")), "{e}");
    let (status, _) = call(base, "DELETE", &format!("/auth/v1/factors/{id}"), &token, json!({}));
    assert_eq!(status, 200);
}
