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
    let (_, settings) = call(&base, "GET", "/auth/v1/settings", None, json!({}));
    assert_eq!(settings["passkeys_enabled"], false);
    let (_, settings) = call(sqlite(), "GET", "/auth/v1/settings", None, json!({}));
    assert_eq!(settings["passkeys_enabled"], true);
}

/// tests/js/webauthn_browser.mjs: a security key and a passkey in Chromium (its virtual
/// authenticator) through supabase-js, on a page of the relying party's origin.
#[test]
fn a_browser_registers_a_key_and_a_passkey_and_signs_in_with_them() {
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        js.join("node_modules/puppeteer-core").is_dir(),
        "puppeteer-core is not installed: run `npm ci` in tests/js (scripts/test does)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "chromium is not installed at {chromium}: scripts/prereqs installs Debian's"
    );
    // WebAuthn wants a domain, and a secure context: http://localhost is both.
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let origin = format!("http://localhost:{port}");
    let path = tempfile::tempdir().expect("temp dir").keep().join("browser.db");
    crate::sqlite::serve_sqlite(
        &path,
        crate::accounts::SCHEMA,
        crate::accounts::RULES,
        rowgate::config::ServeArgs {
            accounts_enabled: Some(true),
            accounts_passkeys_enabled: Some(true),
            accounts_webauthn_rp_id: Some("localhost".into()),
            accounts_webauthn_rp_origins: Some(origin.clone()),
            server_port: Some(port),
            ..Default::default()
        },
    );
    let out = std::process::Command::new("node")
        .arg("webauthn_browser.mjs")
        .current_dir(&js)
        .env("ROWGATE_URL", &origin)
        .env("ANON_KEY", crate::accounts::token_of("anon"))
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node is needed for the browser test");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser test failed:\n{report}");
    let seen: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect(&report);
    assert_eq!(
        seen,
        json!({
            "key": ["aal2", "mfa/webauthn"],
            "passkey": ["aal1", "passkey", "browser@example.com"],
            "raised": ["aal2", ["mfa/webauthn", "passkey"]],
        }),
        "{report}"
    );
}
