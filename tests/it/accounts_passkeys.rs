//! Passkeys' endpoints on both backends: what a caller who is not an authenticator gets (the
//! ceremonies with a software authenticator are tests/js/auth.test.mjs's, and auth-js's own
//! passkey suite's), who may manage passkeys, and a server where they are off.

use serde_json::{json, Value};

use crate::accounts::{auth, on_both, postgres, sqlite};
use crate::support::send_to;

on_both!(bad_ceremonies_get_gotrues_errors_and_are_used_up);
on_both!(a_user_with_a_second_factor_manages_passkeys_only_at_aal2);

fn call(base: &str, method: &str, path: &str, bearer: Option<&str>, body: Value) -> (u16, Value) {
    let authorization = bearer.map(|b| format!("Bearer {b}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &authorization {
        headers.push(("authorization", a));
    }
    let r = send_to(base, method, path, &headers, Some(&body.to_string()));
    let v = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, v)
}

fn signed_up(base: &str, name: &str) -> String {
    let port = base.rsplit(':').next().unwrap_or("0");
    let email = format!("{name}-{port}@example.com");
    let (status, session) = auth(base, "/auth/v1/signup", json!({"email": email, "password": "secret-pass"}));
    assert_eq!(status, 200, "{session}");
    session["access_token"].as_str().expect("a token").to_owned()
}

fn bad_ceremonies_get_gotrues_errors_and_are_used_up(base: &str) {
    let token = signed_up(base, "pia");
    let (status, started) =
        call(base, "POST", "/auth/v1/passkeys/registration/options", Some(&token), json!({}));
    assert_eq!(status, 200, "{started}");
    let challenge = started["challenge_id"].as_str().expect("a challenge").to_owned();
    assert_eq!(started["options"]["authenticatorSelection"]["residentKey"], "required");
    let register =
        |body: Value| call(base, "POST", "/auth/v1/passkeys/registration/verify", Some(&token), body);
    for (body, code, msg) in [
        (json!({"credential": {}}), "validation_failed", "challenge_id is required"),
        (json!({"challenge_id": challenge}), "validation_failed", "credential is required"),
        (
            json!({"challenge_id": "nope", "credential": {}}),
            "validation_failed",
            "challenge_id must be a valid UUID",
        ),
        (
            json!({"challenge_id": "00000000-0000-4000-8000-000000000000", "credential": {}}),
            "webauthn_challenge_not_found",
            "Challenge not found or already used",
        ),
        (
            json!({"challenge_id": challenge, "credential": {"id": "x"}}),
            "webauthn_verification_failed",
            "Invalid credential response",
        ),
        // The ceremony was used by the failed answer.
        (
            json!({"challenge_id": challenge, "credential": {}}),
            "webauthn_challenge_not_found",
            "Challenge not found or already used",
        ),
    ] {
        let (status, e) = register(body.clone());
        assert_eq!((status, &e["error_code"], &e["msg"]), (400, &json!(code), &json!(msg)), "{body}");
    }
    // A sign-in ceremony is anyone's; a registration's is only its user's.
    let (status, options) = call(base, "POST", "/auth/v1/passkeys/authentication/options", None, json!({}));
    assert_eq!(status, 200, "{options}");
    assert_eq!(options["options"]["allowCredentials"], json!([]));
    let sign_in = options["challenge_id"].clone();
    let (status, e) = register(json!({"challenge_id": sign_in, "credential": {}}));
    assert_eq!((status, &e["error_code"]), (400, &json!("webauthn_challenge_not_found")), "{e}");
    let (status, e) = call(
        base,
        "POST",
        "/auth/v1/passkeys/authentication/verify",
        None,
        json!({"challenge_id": sign_in, "credential": {"id": "AAAA", "response": {}}}),
    );
    assert_eq!((status, &e["error_code"]), (400, &json!("webauthn_verification_failed")), "{e}");

    let (status, listed) = call(base, "GET", "/auth/v1/passkeys", Some(&token), json!({}));
    assert_eq!((status, listed), (200, json!([])));
    let unknown = "/auth/v1/passkeys/00000000-0000-4000-8000-000000000000";
    let (status, e) = call(base, "PATCH", unknown, Some(&token), json!({"friendly_name": "key"}));
    assert_eq!((status, &e["msg"]), (404, &json!("Passkey not found")), "{e}");
    let (status, e) = call(base, "PATCH", unknown, Some(&token), json!({"friendly_name": " "}));
    assert_eq!((status, &e["msg"]), (400, &json!("friendly_name is required")), "{e}");
    let (status, e) = call(base, "DELETE", "/auth/v1/passkeys/not-an-id", Some(&token), json!({}));
    assert_eq!((status, &e["msg"]), (404, &json!("Passkey not found")), "{e}");
    let (status, e) = call(base, "GET", "/auth/v1/passkeys", None, json!({}));
    assert_eq!((status, &e["error_code"]), (401, &json!("no_authorization")), "{e}");
}

fn a_user_with_a_second_factor_manages_passkeys_only_at_aal2(base: &str) {
    use totp_rs::{Algorithm, Secret, TOTP};
    let token = signed_up(base, "quin");
    let (_, enrolled) = call(
        base,
        "POST",
        "/auth/v1/factors",
        Some(&token),
        json!({"factor_type": "totp", "friendly_name": "app"}),
    );
    let id = enrolled["id"].as_str().expect("a factor").to_owned();
    let (_, challenge) =
        call(base, "POST", &format!("/auth/v1/factors/{id}/challenge"), Some(&token), json!({}));
    let secret = Secret::Encoded(enrolled["totp"]["secret"].as_str().expect("a secret").to_owned());
    let code = TOTP::new(Algorithm::SHA1, 6, 1, 30, secret.to_bytes().expect("base32"), None, String::new())
        .expect("a TOTP")
        .generate_current()
        .expect("now");
    let (status, aal2) = call(
        base,
        "POST",
        &format!("/auth/v1/factors/{id}/verify"),
        Some(&token),
        json!({"challenge_id": challenge["id"], "code": code}),
    );
    assert_eq!(status, 200, "{aal2}");
    // The first token's session is aal1 still.
    let (status, e) = call(base, "POST", "/auth/v1/passkeys/registration/options", Some(&token), json!({}));
    assert_eq!(
        (status, &e["error_code"], &e["msg"]),
        (
            403,
            &json!("insufficient_aal"),
            &json!("AAL2 session is required to manage passkeys when MFA is enabled")
        )
    );
    let raised = aal2["access_token"].as_str().expect("a token");
    let (status, _) = call(base, "POST", "/auth/v1/passkeys/registration/options", Some(raised), json!({}));
    assert_eq!(status, 200);
}

#[test]
fn passkeys_are_off_unless_turned_on() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("no-passkeys.db");
    let base = crate::sqlite::serve_sqlite(
        &path,
        crate::accounts::SCHEMA,
        crate::accounts::RULES,
        rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() },
    );
    let (status, e) = call(&base, "POST", "/auth/v1/passkeys/authentication/options", None, json!({}));
    assert_eq!(
        (status, e),
        (404, json!({"code": 404, "error_code": "passkey_disabled", "msg": "Passkeys are disabled"}))
    );
}
