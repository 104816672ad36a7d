//! Phone numbers as GoTrue takes them, on both backends: codes texted through Supabase's Send SMS
//! hook (a receiver here checks each request's Standard Webhooks signature) and test numbers'
//! fixed codes; a sign-up confirmed by code, a sign-in by code or with the password, and a
//! number changed by its user.

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};

use crate::accounts::{auth, claims_of, on_both};
use crate::accounts_oauth_server::call;
use crate::support::{default_args, harness, start_server};

/// The hook's secret, as Supabase writes one.
const SECRET: &str = "v1,whsec_c2VjcmV0LW9mLXRoZS1zbXMtaG9vay10ZXN0";
/// A test number and its fixed code: never texted.
const TEST_PHONE: &str = "15550000000";

on_both!(a_number_signs_up_is_confirmed_by_the_code_texted_and_signs_in_with_its_password);
on_both!(a_code_texted_signs_in_and_a_user_changes_their_number);

/// What the hook received: each request's JSON, once its signature checked out.
#[derive(Default, Clone)]
struct Texts(Arc<Mutex<Vec<Value>>>);

impl Texts {
    /// The text last sent to `phone`.
    fn to(&self, phone: &str) -> Value {
        for _ in 0..100 {
            let found = self.0.lock().unwrap().iter().rev().find(|t| t["sms"]["phone"] == phone).cloned();
            if let Some(text) = found {
                return text;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("nothing texted to {phone}")
    }

    /// The code last texted to `phone`.
    fn code_to(&self, phone: &str) -> String {
        self.to(phone)["sms"]["otp"].as_str().unwrap().to_owned()
    }

    /// How many texts went to `phone`.
    fn count_to(&self, phone: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|t| t["sms"]["phone"] == phone).count()
    }
}

/// A Send SMS hook on a loopback port: it checks the signature of every request it gets and
/// keeps the payloads.
fn hook() -> (String, Texts) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/send-sms", listener.local_addr().unwrap());
    let texts = Texts::default();
    let kept = texts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut headers = std::collections::HashMap::new();
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok() && line.trim_end() != "" {
                if let Some((k, v)) = line.trim_end().split_once(':') {
                    headers.insert(k.trim().to_lowercase(), v.trim().to_owned());
                }
                line.clear();
            }
            let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let body = String::from_utf8(body).unwrap();
            let signed = format!("{}.{}.{body}", headers["webhook-id"], headers["webhook-timestamp"]);
            let status = match headers["webhook-signature"] == signature(&signed) {
                true => {
                    kept.0.lock().unwrap().push(serde_json::from_str(&body).unwrap());
                    "200 OK"
                }
                false => "401 Unauthorized",
            };
            let mut stream = reader.into_inner();
            let _ = stream.write_all(
                format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}").as_bytes(),
            );
        }
    });
    (url, texts)
}

/// The signature the hook's secret makes of `signed` (Standard Webhooks').
fn signature(signed: &str) -> String {
    use base64::Engine;
    use hmac::{KeyInit, Mac};
    let key =
        base64::engine::general_purpose::STANDARD.decode(SECRET.trim_start_matches("v1,whsec_")).unwrap();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(signed.as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

fn texting(url: String) -> rowgate::config::ServeArgs {
    rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        accounts_sms_hook: Some(url),
        accounts_sms_hook_secret: Some(SECRET.into()),
        accounts_sms_test_otp: Some(format!("+{TEST_PHONE}=424242")),
        ..Default::default()
    }
}

/// The texts each texting server's hook received.
fn table() -> &'static Mutex<Vec<(String, &'static Texts)>> {
    static TABLE: OnceLock<Mutex<Vec<(String, &'static Texts)>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

fn texts_of(base: &str) -> &'static Texts {
    let all = table().lock().unwrap();
    all.iter().find(|(b, _)| b == base).map(|(_, t)| *t).expect("a texting server")
}

/// `base`, its hook's texts kept for the tests.
fn keep(base: String, texts: Texts) -> String {
    table().lock().unwrap().push((base.clone(), Box::leak(Box::new(texts))));
    base
}

fn sqlite() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let (url, texts) = hook();
        let path = tempfile::tempdir().expect("temp dir").keep().join("phone.db");
        let base =
            crate::sqlite::serve_sqlite(&path, crate::accounts::SCHEMA, crate::accounts::RULES, texting(url));
        keep(base, texts)
    })
}

fn postgres() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        crate::accounts::postgres(); // the accounts installed
        let (url, texts) = hook();
        let base = start_server(rowgate::config::ServeArgs {
            db_schemas: Some("accounts_test".into()),
            ..texting_over(url, default_args(&harness().superuser_uri))
        });
        keep(base, texts)
    })
}

fn texting_over(url: String, args: rowgate::config::ServeArgs) -> rowgate::config::ServeArgs {
    let t = texting(url);
    rowgate::config::ServeArgs {
        accounts_enabled: t.accounts_enabled,
        accounts_sms_hook: t.accounts_sms_hook,
        accounts_sms_hook_secret: t.accounts_sms_hook_secret,
        accounts_sms_test_otp: t.accounts_sms_test_otp,
        ..args
    }
}

/// A number of its own for one test on one server.
fn number(base: &str, n: u8) -> String {
    let port: u32 = base.rsplit(':').next().unwrap().parse().unwrap();
    format!("1555{n:01}{port:06}")
}

fn a_number_signs_up_is_confirmed_by_the_code_texted_and_signs_in_with_its_password(base: &str) {
    let texts = texts_of(base);
    let phone = number(base, 1);
    let (status, user) = auth(
        base,
        "/auth/v1/signup",
        json!({"phone": format!("+{phone}"), "password": "secret-phone", "data": {"n": 1}}),
    );
    assert_eq!(status, 200, "{user}");
    assert_eq!(
        (&user["phone"], user.get("phone_confirmed_at"), user.get("access_token")),
        (&json!(phone), None, None)
    );
    assert_eq!(user["identities"][0]["provider"], "phone");
    assert_eq!(user["identities"][0]["identity_data"]["phone_verified"], false);
    let text = texts.to(&phone);
    assert_eq!(
        (&text["sms"]["phone"], &text["sms"]["sms_type"], &text["user"]["id"]),
        (&json!(phone), &json!("confirmation"), &user["id"])
    );
    let code = texts.code_to(&phone);
    assert_eq!(code.len(), 6);

    // Not before the number is confirmed.
    let login = json!({"phone": phone, "password": "secret-phone"});
    let (status, e) = auth(base, "/auth/v1/token?grant_type=password", login.clone());
    assert_eq!(
        (status, e),
        (400, json!({"code": 400, "error_code": "phone_not_confirmed", "msg": "Phone not confirmed"}))
    );
    let wrong = if code == "000000" { "000001" } else { "000000" };
    let (status, e) = auth(base, "/auth/v1/verify", json!({"phone": phone, "token": wrong, "type": "sms"}));
    assert_eq!(
        (status, e),
        (403, json!({"code": 403, "error_code": "otp_expired", "msg": "Token has expired or is invalid"}))
    );
    let (status, session) =
        auth(base, "/auth/v1/verify", json!({"phone": phone, "token": code, "type": "sms"}));
    assert_eq!(status, 200, "{session}");
    assert!(session["user"]["phone_confirmed_at"].is_string(), "{session}");
    assert_eq!(claims_of(session["access_token"].as_str().unwrap())["amr"][0]["method"], "otp");
    // A code works once.
    let (status, _) = auth(base, "/auth/v1/verify", json!({"phone": phone, "token": code, "type": "sms"}));
    assert_eq!(status, 403);

    let (status, session) = auth(base, "/auth/v1/token?grant_type=password", login);
    assert_eq!(status, 200, "{session}");
    assert_eq!(
        (&session["user"]["id"], &claims_of(session["access_token"].as_str().unwrap())["phone"]),
        (&user["id"], &json!(phone))
    );

    // Signing up again with the number: as GoTrue says it where addresses are taken without a
    // mail (no SMTP here); with mail it answers a user that is not the account's.
    let before = texts.count_to(&phone);
    let (status, again) = auth(base, "/auth/v1/signup", json!({"phone": phone, "password": "another one"}));
    assert_eq!(
        (status, again),
        (422, json!({"code": 422, "error_code": "user_already_exists", "msg": "User already registered"}))
    );
    assert_eq!(texts.count_to(&phone), before, "nothing texted");
    let (status, e) = auth(base, "/auth/v1/signup", json!({"phone": "+0123", "password": "secret-phone"}));
    assert_eq!((status, &e["msg"]), (400, &json!("Invalid phone number format (E.164 required)")));
}

fn a_code_texted_signs_in_and_a_user_changes_their_number(base: &str) {
    let texts = texts_of(base);
    let phone = number(base, 2);
    let (status, sent) = auth(base, "/auth/v1/otp", json!({"phone": phone, "data": {"via": "otp"}}));
    assert_eq!((status, sent), (200, json!({"message_id": ""})));
    let (status, session) =
        auth(base, "/auth/v1/verify", json!({"phone": phone, "token": texts.code_to(&phone), "type": "sms"}));
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["user"]["user_metadata"]["via"], "otp");
    // Another code only after the interval.
    let (status, e) = auth(base, "/auth/v1/otp", json!({"phone": phone}));
    assert_eq!((status, &e["error_code"]), (429, &json!("over_sms_send_rate_limit")));
    let (status, e) = auth(base, "/auth/v1/otp", json!({"phone": number(base, 3), "create_user": false}));
    assert_eq!((status, &e["error_code"]), (422, &json!("otp_disabled")));

    // A new number is taken once its code comes back.
    let bearer = session["access_token"].as_str().unwrap().to_owned();
    let new = number(base, 4);
    let (status, _) = call(base, "PUT", "/auth/v1/user", Some(&bearer), Some(json!({"phone": new})));
    assert_eq!(status, 200);
    let (_, user) = call(base, "GET", "/auth/v1/user", Some(&bearer), None);
    assert_eq!((&user["phone"], &user["new_phone"]), (&json!(phone), &json!(new)));
    assert_eq!(texts.to(&new)["sms"]["sms_type"], "phone_change");
    let (status, changed) = auth(
        base,
        "/auth/v1/verify",
        json!({"phone": new, "token": texts.code_to(&new), "type": "phone_change"}),
    );
    assert_eq!(status, 200, "{changed}");
    assert_eq!((&changed["user"]["phone"], changed["user"].get("new_phone")), (&json!(new), None));

    // A test number's code is fixed, and never texted.
    let (status, _) = auth(base, "/auth/v1/otp", json!({"phone": format!("+{TEST_PHONE}")}));
    assert_eq!(status, 200);
    let (status, session) =
        auth(base, "/auth/v1/verify", json!({"phone": TEST_PHONE, "token": "424242", "type": "sms"}));
    assert_eq!((status, &session["user"]["phone"]), (200, &json!(TEST_PHONE)), "{session}");
    assert_eq!(texts.count_to(TEST_PHONE), 0);
}

/// Without a hook or test numbers, a number is refused as GoTrue without an SMS provider
/// refuses it.
#[test]
fn without_a_way_to_text_phone_numbers_are_refused() {
    let base = crate::accounts::sqlite();
    let (status, e) = auth(base, "/auth/v1/otp", json!({"phone": "15551234567"}));
    assert_eq!(
        (status, e),
        (
            422,
            json!({"code": 422, "error_code": "phone_provider_disabled", "msg": "Unsupported phone provider"})
        )
    );
    let (status, e) =
        auth(base, "/auth/v1/signup", json!({"phone": "15551234567", "password": "secret-phone"}));
    assert_eq!((status, &e["error_code"]), (422, &json!("phone_provider_disabled")));
}
