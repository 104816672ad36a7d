//! The accounts' mail through a real SMTP server (aiosmtpd), on both backends: a sign-up
//! confirmed by its link or its code, recovery, magic links and one-time codes, an email change,
//! an administrator's invitation and generated links, and redirects only where allowed.

use std::sync::OnceLock;

use rowgate::config::ServeArgs;
use serde_json::{json, Value};

use crate::accounts::{auth, claims_of, on_both, token_of, RULES, SCHEMA};
use crate::support::smtp::sink;
use crate::support::{default_args, harness, request_to, send_to, start_server, JWT_SECRET};

/// `args` sending mail through the test's SMTP server; links lead to `http://app.test` or,
/// allowed, `http://localhost:*`; tokens are signed with an ES256 key; rowgate is an OAuth server
/// whose consent page is `http://app.test/oauth/consent`; two test phone numbers have fixed codes.
fn mailing(args: ServeArgs) -> ServeArgs {
    let key = tempfile::tempdir().expect("temp dir").keep().join("signing.pem");
    std::fs::write(&key, crate::accounts_users::NEW_KEY).expect("a key file");
    ServeArgs {
        accounts_signing_keys: Some(format!("@{}", key.display())),
        accounts_enabled: Some(true),
        smtp_host: Some("127.0.0.1".into()),
        smtp_port: Some(sink().port),
        smtp_tls: Some("off".into()),
        smtp_sender: Some("no-reply@rowgate.test".into()),
        smtp_sender_name: Some("Rowgate Test".into()),
        accounts_site_url: Some("http://app.test".into()),
        accounts_passkeys_enabled: Some(true),
        accounts_redirect_urls: Some("http://localhost:*/**".into()),
        accounts_anonymous_enabled: Some(true),
        accounts_secure_password_change: Some(true),
        accounts_oauth_server_enabled: Some(true),
        accounts_oauth_server_authorization_path: Some("/oauth/consent".into()),
        accounts_sms_test_otp: Some("15550001111=123456,15550002222=654321".into()),
        ..args
    }
}

fn sqlite() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("mail.db");
        crate::sqlite::serve_sqlite(&path, SCHEMA, RULES, mailing(ServeArgs::default()))
    })
}

fn postgres() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        crate::accounts::postgres(); // the accounts installed
        start_server(mailing(ServeArgs {
            db_schemas: Some("accounts_test".into()),
            ..default_args(&harness().superuser_uri)
        }))
    })
}

on_both!(a_sign_up_is_confirmed_by_the_link_mailed_to_it);
on_both!(a_code_typed_in_confirms_a_sign_up_and_wrong_ones_are_refused);
on_both!(recovery_signs_in_to_set_a_new_password);
on_both!(one_time_codes_and_magic_links_sign_in);
on_both!(a_new_address_is_taken_once_it_confirms);
on_both!(links_lead_only_to_the_site_or_the_allowed_urls);
on_both!(an_administrator_invites_and_generates_links);
on_both!(supabase_js_signs_users_up_in_and_out);
on_both!(a_pkce_link_leads_back_with_a_code_only_its_verifier_exchanges);
on_both!(an_old_session_changes_the_password_only_with_a_code_mailed_to_the_user);

/// tests/js/auth.test.mjs: the real supabase-js client's `auth` against `base`.
fn supabase_js_signs_users_up_in_and_out(base: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        dir.join("node_modules/@supabase/supabase-js").is_dir(),
        "supabase-js is not installed: run `npm ci` in tests/js (scripts/test does)"
    );
    let out = std::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "--test-concurrency=1", "auth.test.mjs"])
        .current_dir(&dir)
        .env("ROWGATE_URL", base)
        .env("ROWGATE_JWT_SECRET", JWT_SECRET)
        .env("MAILDIR", sink().dir())
        .output()
        .expect("node is needed for the auth-js tests");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "auth-js tests failed:\n{report}");
}

/// A unique address for one run of one test on one backend.
fn address(name: &str, base: &str) -> String {
    let port = base.rsplit(':').next().unwrap_or("0");
    format!("{name}-{port}@example.com")
}

fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = send_to(base, "POST", path, &[("content-type", "application/json")], Some(&body.to_string()));
    let v = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, v)
}

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

/// Follows a link from a mail on `base` (whatever host it names), without following the
/// redirect: its status and `Location`.
pub(crate) fn follow(base: &str, link: &str) -> (u16, String) {
    let path = &link[link.find("/auth/v1/").expect("a link to /auth/v1")..];
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let r = client.get(format!("{base}{path}")).send().expect("a response");
    let location = r.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    (r.status().as_u16(), location)
}

/// The `key=value` pairs of a URL's fragment.
pub(crate) fn fragment(url: &str) -> Value {
    let (_, fragment) = url.split_once('#').expect("a fragment");
    Value::Object(
        form_urlencoded::parse(fragment.as_bytes())
            .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
            .collect(),
    )
}

fn log_in(base: &str, email: &str, password: &str) -> (u16, Value) {
    post(base, "/auth/v1/token?grant_type=password", json!({"email": email, "password": password}))
}

fn a_sign_up_is_confirmed_by_the_link_mailed_to_it(base: &str) {
    let kay = address("kay", base);
    let (status, user) = auth(base, "/auth/v1/signup", json!({"email": kay, "password": "secret-kay"}));
    // No session until the address is confirmed: the user, and when its confirmation went out.
    assert_eq!((status, user.get("access_token"), &user["email"]), (200, None, &json!(kay)), "{user}");
    assert!(user["confirmation_sent_at"].is_string() && user.get("email_confirmed_at").is_none(), "{user}");
    let (status, e) = log_in(base, &kay, "secret-kay");
    assert_eq!(
        (status, e),
        (400, json!({"code": 400, "error_code": "email_not_confirmed", "msg": "Email not confirmed"}))
    );
    let mail = sink().mail_to(&kay);
    assert_eq!(mail.subject, "Confirm your address");
    assert!(mail.from.contains("no-reply@rowgate.test"), "{}", mail.from);
    let (status, location) = follow(base, &mail.link());
    assert_eq!(status, 303);
    assert!(location.starts_with("http://app.test#"), "{location}");
    let session = fragment(&location);
    assert_eq!((&session["type"], &session["token_type"]), (&json!("signup"), &json!("bearer")), "{session}");
    assert_eq!(claims_of(session["access_token"].as_str().unwrap())["email"], json!(kay));
    let (status, login) = log_in(base, &kay, "secret-kay");
    assert_eq!((status, login["user"]["email_confirmed_at"].is_string()), (200, true), "{login}");
    // A link is used once.
    let (status, location) = follow(base, &mail.link());
    assert_eq!(status, 303);
    assert_eq!(
        fragment(&location),
        json!({"error": "access_denied", "error_code": "otp_expired",
               "error_description": "Email link is invalid or has expired", "sb": ""})
    );
    // Signing up again with the address says nothing of the account.
    let (status, again) = auth(base, "/auth/v1/signup", json!({"email": kay, "password": "other-kay"}));
    assert_eq!((status, &again["identities"]), (200, &json!([])), "{again}");
    assert_ne!(again["id"], user["id"]);
}

fn a_code_typed_in_confirms_a_sign_up_and_wrong_ones_are_refused(base: &str) {
    let lou = address("lou", base);
    auth(base, "/auth/v1/signup", json!({"email": lou, "password": "secret-lou"}));
    let code = sink().mail_to(&lou).code();
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let (status, e) = post(base, "/auth/v1/verify", json!({"type": "signup", "email": lou, "token": wrong}));
    assert_eq!(
        (status, e),
        (403, json!({"code": 403, "error_code": "otp_expired", "msg": "Token has expired or is invalid"}))
    );
    // A mailed code is no SMS code: GoTrue asks for a phone number, and none sent by SMS is right.
    let (status, e) = post(base, "/auth/v1/verify", json!({"type": "sms", "email": lou, "token": code}));
    assert_eq!((status, e["msg"].as_str()), (400, Some("Invalid phone number format (E.164 required)")));
    let (status, e) =
        post(base, "/auth/v1/verify", json!({"type": "sms", "phone": "+4712345678", "token": code}));
    assert_eq!((status, e["error_code"].as_str()), (403, Some("otp_expired")));
    let (status, e) = post(base, "/auth/v1/verify", json!({"type": "fax", "email": lou, "token": code}));
    assert_eq!((status, e["msg"].as_str()), (400, Some("Unsupported verification type")));
    let (status, session) =
        post(base, "/auth/v1/verify", json!({"type": "signup", "email": lou, "token": code}));
    assert_eq!((status, &session["user"]["email"]), (200, &json!(lou)), "{session}");
    assert!(session["refresh_token"].is_string(), "{session}");
}

fn recovery_signs_in_to_set_a_new_password(base: &str) {
    let max = address("max", base);
    auth(base, "/auth/v1/signup", json!({"email": max, "password": "secret-max"}));
    let confirm = sink().mail_to(&max).link();
    assert_eq!(follow(base, &confirm).0, 303);

    // An unknown address is answered the same, and nothing is sent.
    let nobody = address("nobody", base);
    assert_eq!(post(base, "/auth/v1/recover", json!({"email": nobody})), (200, json!({})));
    assert_eq!(post(base, "/auth/v1/recover", json!({"email": max})), (200, json!({})));
    let mail = sink().mail_to(&max);
    assert_eq!(mail.subject, "Reset your password");
    // One mail of a kind a minute.
    let (status, e) = post(base, "/auth/v1/recover", json!({"email": max}));
    assert_eq!((status, e["error_code"].as_str()), (429, Some("over_email_send_rate_limit")), "{e}");
    assert!(sink().nothing_to(&nobody));

    let link = mail.link();
    let token_hash = form_urlencoded::parse(link.split_once('?').unwrap().1.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .expect("the link's token");
    let (status, session) =
        post(base, "/auth/v1/verify", json!({"type": "recovery", "token_hash": token_hash}));
    assert_eq!(status, 200, "{session}");
    let access = session["access_token"].as_str().unwrap();
    let (status, _) = call(base, "PUT", "/auth/v1/user", access, json!({"password": "new-secret-max"}));
    assert_eq!(status, 200);
    assert_eq!(log_in(base, &max, "secret-max").0, 400);
    assert_eq!(log_in(base, &max, "new-secret-max").0, 200);
}

fn one_time_codes_and_magic_links_sign_in(base: &str) {
    let nia = address("nia", base);
    let (status, e) = post(base, "/auth/v1/otp", json!({"email": nia, "create_user": false}));
    assert_eq!(
        (status, e),
        (422, json!({"code": 422, "error_code": "otp_disabled", "msg": "Signups not allowed for otp"}))
    );
    // An unknown address signs up, without a password, and confirms with the code it is sent.
    assert_eq!(post(base, "/auth/v1/otp", json!({"email": nia, "data": {"from": "otp"}})), (200, json!({})));
    let code = sink().mail_to(&nia).code();
    let (status, session) =
        post(base, "/auth/v1/verify", json!({"type": "email", "email": nia, "token": code}));
    assert_eq!((status, &session["user"]["user_metadata"]), (200, &json!({"from": "otp"})), "{session}");
    assert_eq!(log_in(base, &nia, "").0, 400, "no password was set");
    // Known and confirmed: a magic link.
    assert_eq!(post(base, "/auth/v1/magiclink", json!({"email": nia})), (200, json!({})));
    let mail = sink().mail_to(&nia);
    assert_eq!(mail.subject, "Your sign-in link");
    let (status, location) = follow(base, &mail.link());
    assert_eq!((status, &fragment(&location)["type"]), (303, &json!("magiclink")), "{location}");
}

fn a_new_address_is_taken_once_it_confirms(base: &str) {
    let (old, new) = (address("ola", base), address("ola-new", base));
    auth(base, "/auth/v1/signup", json!({"email": old, "password": "secret-ola"}));
    let code = sink().mail_to(&old).code();
    let (_, session) = post(base, "/auth/v1/verify", json!({"type": "signup", "email": old, "token": code}));
    let access = session["access_token"].as_str().unwrap().to_owned();
    let (status, user) = call(base, "PUT", "/auth/v1/user", &access, json!({"email": new}));
    assert_eq!((status, &user["email"], &user["new_email"]), (200, &json!(old), &json!(new)), "{user}");
    let mail = sink().mail_to(&new);
    assert_eq!(mail.subject, "Confirm your new address");
    assert!(mail.body.contains(&old) && mail.body.contains(&new), "{}", mail.body);
    // A secure change (the default) asks the current address too: the first code to come back
    // is accepted and waits for the other.
    let current = sink().mail_to(&old);
    let (status, waiting) =
        post(base, "/auth/v1/verify", json!({"type": "email_change", "email": new, "token": mail.code()}));
    assert_eq!(
        (status, waiting),
        (
            200,
            json!({"msg": "Confirmation link accepted. Please proceed to confirm link sent to the other email", "code": 200})
        )
    );
    assert_eq!(log_in(base, &old, "secret-ola").0, 200, "not changed yet");
    let (status, changed) =
        post(base, "/auth/v1/verify", json!({"type": "email_change", "email": old, "token": current.code()}));
    assert_eq!((status, &changed["user"]["email"]), (200, &json!(new)), "{changed}");
    assert_eq!(log_in(base, &new, "secret-ola").0, 200);
    assert_eq!(log_in(base, &old, "secret-ola").0, 400);
}

fn links_lead_only_to_the_site_or_the_allowed_urls(base: &str) {
    for (n, (requested, lands)) in [
        ("http://localhost:5173/welcome", "http://localhost:5173/welcome#"),
        ("https://evil.example/", "http://app.test#"),
        ("http://app.test.evil.example/", "http://app.test#"),
    ]
    .into_iter()
    .enumerate()
    {
        let who = address(&format!("pat{n}"), base);
        let path = format!(
            "/auth/v1/signup?redirect_to={}",
            form_urlencoded::byte_serialize(requested.as_bytes()).collect::<String>()
        );
        assert_eq!(auth(base, &path, json!({"email": who, "password": "secret-pat"})).0, 200);
        let (status, location) = follow(base, &sink().mail_to(&who).link());
        assert_eq!(status, 303);
        assert!(location.starts_with(lands), "{requested} led to {location}");
    }
}

fn an_administrator_invites_and_generates_links(base: &str) {
    let service = token_of("service_role");
    let quin = address("quin", base);
    let (status, e) =
        call(base, "POST", "/auth/v1/invite", &token_of("authenticated"), json!({"email": quin}));
    assert_eq!((status, e["error_code"].as_str()), (403, Some("not_admin")));
    let (status, user) =
        call(base, "POST", "/auth/v1/invite", &service, json!({"email": quin, "data": {"team": "a"}}));
    assert_eq!((status, &user["user_metadata"]), (200, &json!({"team": "a"})), "{user}");
    assert!(user["invited_at"].is_string(), "{user}");
    let mail = sink().mail_to(&quin);
    assert_eq!(mail.subject, "You are invited");
    let (status, location) = follow(base, &mail.link());
    assert_eq!((status, &fragment(&location)["type"]), (303, &json!("invite")), "{location}");
    let access = fragment(&location)["access_token"].as_str().unwrap().to_owned();
    assert_eq!(call(base, "PUT", "/auth/v1/user", &access, json!({"password": "secret-quin"})).0, 200);

    // A link made without a mail, for an application that sends its own.
    let (status, link) = call(
        base,
        "POST",
        "/auth/v1/admin/generate_link",
        &service,
        json!({"type": "recovery", "email": quin, "redirect_to": "http://localhost:3000/reset"}),
    );
    assert_eq!(status, 200, "{link}");
    assert_eq!((&link["email"], &link["verification_type"]), (&json!(quin), &json!("recovery")));
    assert_eq!(link["redirect_to"], json!("http://localhost:3000/reset"));
    assert!(link["action_link"].as_str().unwrap().contains(link["hashed_token"].as_str().unwrap()), "{link}");
    assert!(sink().nothing_to(&quin));
    let (status, session) =
        post(base, "/auth/v1/verify", json!({"type": "recovery", "email": quin, "token": link["email_otp"]}));
    assert_eq!(status, 200, "{session}");
    let (status, e) = call(
        base,
        "POST",
        "/auth/v1/admin/generate_link",
        &service,
        json!({"type": "magiclink", "email": address("nobody-at-all", base)}),
    );
    assert_eq!((status, e["error_code"].as_str()), (404, Some("user_not_found")));
    let r = request_to(base, "GET", "/auth/v1/settings", &[]);
    assert_eq!(
        (&r.json()["mailer_autoconfirm"], &r.json()["external"]["email"]),
        (&json!(false), &json!(true))
    );
}

fn a_pkce_link_leads_back_with_a_code_only_its_verifier_exchanges(base: &str) {
    use base64::Engine;
    use sha2::Digest;
    let verifier = "a-verifier-of-the-client-that-asked-0123456789-abcdefghij";
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier));
    let pkce = |email: &str| json!({"email": email, "password": "secret-pkce", "code_challenge": challenge, "code_challenge_method": "s256"});
    let (status, e) = auth(
        base,
        "/auth/v1/signup",
        json!({"email": address("pk0", base), "password": "secret-pkce", "code_challenge": challenge}),
    );
    assert_eq!(
        (status, e["msg"].as_str()),
        (400, Some("PKCE flow requires code_challenge_method and code_challenge"))
    );

    let rae = address("rae", base);
    assert_eq!(auth(base, "/auth/v1/signup", pkce(&rae)).0, 200);
    let link = sink().mail_to(&rae).link();
    assert!(link.contains("token=pkce_"), "{link}");
    let (status, location) = follow(base, &link);
    assert_eq!(status, 303);
    let code =
        location.strip_prefix("http://app.test/?code=").unwrap_or_else(|| panic!("{location}")).to_owned();
    let (status, e) =
        post(base, "/auth/v1/token?grant_type=pkce", json!({"auth_code": code, "code_verifier": "not-it"}));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("bad_code_verifier")));
    // A code is tried once: a wrong verifier uses it up.
    let (status, e) =
        post(base, "/auth/v1/token?grant_type=pkce", json!({"auth_code": code, "code_verifier": verifier}));
    assert_eq!((status, e["error_code"].as_str()), (404, Some("flow_state_not_found")));

    let sal = address("sal", base);
    assert_eq!(auth(base, "/auth/v1/signup", pkce(&sal)).0, 200);
    let (_, location) = follow(base, &sink().mail_to(&sal).link());
    let code = location.rsplit("code=").next().unwrap().to_owned();
    let (status, session) =
        post(base, "/auth/v1/token?grant_type=pkce", json!({"auth_code": code, "code_verifier": verifier}));
    assert_eq!((status, &session["user"]["email"]), (200, &json!(sal)), "{session}");
    assert!(session["user"]["email_confirmed_at"].is_string(), "{session}");

    // The code typed in still confirms, without the flow.
    let tia = address("tia", base);
    assert_eq!(auth(base, "/auth/v1/signup", pkce(&tia)).0, 200);
    let typed = sink().mail_to(&tia).code();
    let (status, session) =
        post(base, "/auth/v1/verify", json!({"type": "signup", "email": tia, "token": typed}));
    assert_eq!((status, &session["user"]["email"]), (200, &json!(tia)), "{session}");
}

fn an_old_session_changes_the_password_only_with_a_code_mailed_to_the_user(base: &str) {
    let vic = address("vic", base);
    auth(base, "/auth/v1/signup", json!({"email": vic, "password": "secret-vic"}));
    let (_, session) = post(
        base,
        "/auth/v1/verify",
        json!({"type": "signup", "email": vic, "token": sink().mail_to(&vic).code()}),
    );
    // A session that signed in within a day needs no more proof.
    let fresh = session["access_token"].as_str().unwrap().to_owned();
    assert_eq!(claims_of(&fresh)["amr"][0]["method"], "otp", "a code typed in signed it in");
    assert_eq!(call(base, "PUT", "/auth/v1/user", &fresh, json!({"password": "secret-vic-2"})).0, 200);
    // One that signed in two days ago (its token says so) does.
    let claims = claims_of(&fresh);
    let old_session = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"role": "authenticated", "aud": "authenticated", "sub": claims["sub"], "email": vic,
                "session_id": claims["session_id"], "exp": 4_102_444_800u64,
                "amr": [{"method": "password", "timestamp": claims["iat"].as_i64().unwrap() - 2 * 86_400}]}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .expect("a token");
    let (status, e) = call(base, "PUT", "/auth/v1/user", &old_session, json!({"password": "secret-vic-3"}));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("reauthentication_needed")), "{e}");
    let (status, _) = call(base, "GET", "/auth/v1/reauthenticate", &old_session, Value::Null);
    assert_eq!(status, 200);
    let mail = sink().mail_to(&vic);
    assert_eq!(mail.subject, "Confirm it is you");
    let wrong = if mail.code() == "000000" { "111111" } else { "000000" };
    let (status, e) =
        call(base, "PUT", "/auth/v1/user", &old_session, json!({"password": "secret-vic-3", "nonce": wrong}));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("reauthentication_not_valid")), "{e}");
    let (status, _) = call(
        base,
        "PUT",
        "/auth/v1/user",
        &old_session,
        json!({"password": "secret-vic-3", "nonce": mail.code()}),
    );
    assert_eq!(status, 200);
    assert_eq!(log_in(base, &vic, "secret-vic-3").0, 200);
}

/// A resent email change asks both addresses again: the new address's code alone never makes a
/// secure change.
#[test]
fn a_resent_secure_email_change_still_needs_both_addresses() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("resend.db");
    let args = mailing(ServeArgs { accounts_mail_interval: Some(0), ..ServeArgs::default() });
    let base = crate::sqlite::serve_sqlite(&path, SCHEMA, RULES, args);
    let (old, new) = (address("wes", &base), address("wes-new", &base));
    auth(&base, "/auth/v1/signup", json!({"email": old, "password": "secret-wes"}));
    let code = sink().mail_to(&old).code();
    let (_, session) = post(&base, "/auth/v1/verify", json!({"type": "signup", "email": old, "token": code}));
    let access = session["access_token"].as_str().unwrap().to_owned();
    assert_eq!(call(&base, "PUT", "/auth/v1/user", &access, json!({"email": new})).0, 200);
    sink().mail_to(&new);
    sink().mail_to(&old);
    assert_eq!(
        post(&base, "/auth/v1/resend", json!({"type": "email_change", "email": old})),
        (200, json!({}))
    );
    let to_new = sink().mail_to(&new);
    let to_old = sink().mail_to(&old);
    let (status, waiting) =
        post(&base, "/auth/v1/verify", json!({"type": "email_change", "email": new, "token": to_new.code()}));
    assert_eq!((status, waiting["code"].as_i64()), (200, Some(200)), "{waiting}");
    assert_eq!(log_in(&base, &old, "secret-wes").0, 200, "not changed by the new address alone");
    let (status, changed) =
        post(&base, "/auth/v1/verify", json!({"type": "email_change", "email": old, "token": to_old.code()}));
    assert_eq!((status, &changed["user"]["email"]), (200, &json!(new)), "{changed}");
}
