//! Sign-in through an OpenID provider (npm's `oidc-provider`, a real one), on both backends:
//! `/authorize` to the provider's login and back through `/callback` with a session or a PKCE
//! code; accounts made, found again and linked by a verified address; the provider's refusals
//! and forged states sent back as errors; and `POST /token?grant_type=id_token`.

use std::sync::OnceLock;

use rowgate::config::ServeArgs;
use serde_json::{json, Value};

use crate::accounts::{auth, claims_of, on_both, RULES, SCHEMA};
use crate::accounts_mail::{follow, fragment};
use crate::support::oidc::{id_token, idp, sign_in_at};
use crate::support::{default_args, harness, send_to, start_server};

/// `args` with the test provider, named `test`, for a server on `port`.
fn with_provider(args: ServeArgs, port: u16) -> ServeArgs {
    let idp = idp();
    ServeArgs {
        server_port: Some(port),
        accounts_enabled: Some(true),
        accounts_external_url: Some(format!("http://127.0.0.1:{port}")),
        accounts_site_url: Some("http://app.test".into()),
        accounts_manual_linking: Some(true),
        accounts_anonymous_enabled: Some(true),
        // `mobile` and `stranger` are other clients of the same provider: the first takes the
        // ID tokens `test`'s client gets (another audience of its), the second does not.
        // `posting` has it post its answers; `plain` uses it as an OAuth 2.0 provider without
        // OpenID Connect (no ID token: who signed in is its userinfo endpoint's word).
        accounts_providers: Some(format!(
            "test issuer={0} client-id={1} secret={2}
             mobile issuer={0} client-id=web-client secret=x audiences={1}
             stranger issuer={0} client-id=web-client secret=x
             posting issuer={0} client-id={1} secret={2} response-mode=form_post
             plain authorize-url={0}/auth token-url={0}/token userinfo-url={0}/me client-id={1} secret={2} scopes=openid",
            idp.issuer, idp.client_id, idp.secret
        )),
        ..args
    }
}

fn sqlite() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("oauth.db");
        let args = with_provider(ServeArgs::default(), idp().rowgate_ports[0]);
        crate::sqlite::serve_sqlite(&path, SCHEMA, RULES, args)
    })
}

fn postgres() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        crate::accounts::postgres(); // the accounts installed
        let args =
            ServeArgs { db_schemas: Some("accounts_test".into()), ..default_args(&harness().superuser_uri) };
        start_server(with_provider(args, idp().rowgate_ports[1]))
    })
}

on_both!(a_provider_signs_a_user_up_then_in_again);
on_both!(a_verified_address_joins_the_account_that_has_it);
on_both!(an_address_the_provider_did_not_verify_takes_no_account);
on_both!(a_pkce_client_gets_a_code_only_its_verifier_exchanges);
on_both!(refusals_and_forged_states_come_back_as_errors);
on_both!(an_id_token_from_the_provider_signs_in);
on_both!(a_signed_in_user_links_an_identity_and_unlinks_it);
on_both!(a_provider_may_answer_with_a_posted_form);
on_both!(an_oauth2_provider_s_userinfo_names_the_user);
on_both!(an_anonymous_user_becomes_the_identity_s);

/// A unique login name at the provider for one test on one backend.
fn login(name: &str, base: &str) -> String {
    format!("{name}-{}", base.rsplit(':').next().unwrap_or("0"))
}

/// Signs `login` in through the provider from `/authorize?{query}`: where `/callback` sends
/// the browser (its status and `Location`).
fn through_provider(base: &str, query: &str, login: &str) -> (u16, String) {
    let (status, provider) = follow(base, &format!("/auth/v1/authorize?provider=test&{query}"));
    assert_eq!(status, 302, "{provider}");
    assert!(provider.starts_with(&idp().issuer), "{provider}");
    let callback = sign_in_at(&provider, login, &format!("{base}/auth/v1/callback"));
    follow(base, &callback)
}

fn get_user(base: &str, access: &str) -> Value {
    let bearer = format!("Bearer {access}");
    let r = send_to(base, "GET", "/auth/v1/user", &[("authorization", &bearer)], None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn a_provider_signs_a_user_up_then_in_again(base: &str) {
    let name = login("alice", base);
    let (status, to) = through_provider(base, "redirect_to=http://app.test/welcome", &name);
    assert_eq!(status, 302);
    assert!(to.starts_with("http://app.test/welcome#"), "{to}");
    let session = fragment(&to);
    assert_eq!(session["token_type"], "bearer");
    assert_eq!(session["expires_in"], "3600");
    assert!(session["provider_token"].as_str().is_some_and(|t| !t.is_empty()), "{session}");
    let user = get_user(base, session["access_token"].as_str().unwrap());
    let email = format!("{name}@example.com");
    assert_eq!(user["email"], email.as_str());
    assert!(user["email_confirmed_at"].is_string(), "{user}");
    assert_eq!(user["app_metadata"], json!({"provider": "test", "providers": ["test"]}));
    assert_eq!(user["user_metadata"]["name"], format!("User {name}"));
    assert_eq!(user["user_metadata"]["avatar_url"], format!("https://example.com/{name}.png"));
    assert_eq!(user["user_metadata"]["email_verified"], true);
    let identities = user["identities"].as_array().expect("identities");
    assert_eq!(identities.len(), 1, "{user}");
    assert_eq!(identities[0]["provider"], "test");
    assert_eq!(identities[0]["id"], name.as_str());
    assert_eq!(identities[0]["user_id"], user["id"]);
    assert_eq!(identities[0]["email"], email.as_str());
    assert_eq!(identities[0]["identity_data"]["iss"], idp().issuer.as_str());
    assert_eq!(identities[0]["identity_data"]["sub"], name.as_str());

    // The session says how it signed in, and keeps saying it after a refresh.
    let amr = |token: &Value| claims_of(token.as_str().unwrap())["amr"][0]["method"].clone();
    assert_eq!(amr(&session["access_token"]), "oauth");
    let (status, refreshed) = auth(
        base,
        "/auth/v1/token?grant_type=refresh_token",
        json!({"refresh_token": session["refresh_token"]}),
    );
    assert_eq!(status, 200, "{refreshed}");
    assert_eq!(amr(&refreshed["access_token"]), "oauth");

    // The same subject again: the same account.
    let (_, to) = through_provider(base, "redirect_to=http://app.test/welcome", &name);
    let again = get_user(base, fragment(&to)["access_token"].as_str().unwrap());
    assert_eq!(again["id"], user["id"]);
    assert_eq!(again["identities"].as_array().map(Vec::len), Some(1));
}

fn a_verified_address_joins_the_account_that_has_it(base: &str) {
    let name = login("bea", base);
    let email = format!("{name}@example.com");
    let (status, signed_up) =
        auth(base, "/auth/v1/signup", json!({"email": email, "password": "set by someone"}));
    assert_eq!(status, 200, "{signed_up}");
    // Taken at once (autoconfirm): confirmed, as GoTrue's, yet not proved.
    assert!(signed_up["user"]["email_confirmed_at"].is_string(), "{signed_up}");
    assert_eq!(signed_up["user"]["identities"][0]["identity_data"]["email_verified"], false);
    let (_, to) = through_provider(base, "", &name);
    assert!(to.starts_with("http://app.test#"), "{to}");
    let user = get_user(base, fragment(&to)["access_token"].as_str().unwrap());
    assert_eq!(user["id"], signed_up["user"]["id"]);
    assert_eq!(user["app_metadata"]["providers"], json!(["email", "test"]));
    let providers: Vec<&str> =
        user["identities"].as_array().unwrap().iter().map(|i| i["provider"].as_str().unwrap()).collect();
    assert_eq!(providers, ["email", "test"]);
    assert!(user["email_confirmed_at"].is_string(), "{user}");
    // Nothing proved the address, so whoever chose the password had not shown it was theirs:
    // the password is gone.
    let (status, refused) = auth(
        base,
        "/auth/v1/token?grant_type=password",
        json!({"email": email, "password": "set by someone"}),
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error_code"], "invalid_credentials");
}

fn an_address_the_provider_did_not_verify_takes_no_account(base: &str) {
    let name = login("unverified-cy", base);
    let email = format!("{name}@example.com");
    let (status, signed_up) = auth(base, "/auth/v1/signup", json!({"email": email, "password": "cy's own"}));
    assert_eq!(status, 200, "{signed_up}");
    let (_, to) = through_provider(base, "", &name);
    let user = get_user(base, fragment(&to)["access_token"].as_str().unwrap());
    assert_ne!(user["id"], signed_up["user"]["id"]);
    assert_eq!(user["email"], "", "{user}");
    assert_eq!(user["identities"][0]["identity_data"]["email_verified"], false);
    let (status, _) =
        auth(base, "/auth/v1/token?grant_type=password", json!({"email": email, "password": "cy's own"}));
    assert_eq!(status, 200, "the address's own account is untouched");
}

fn a_pkce_client_gets_a_code_only_its_verifier_exchanges(base: &str) {
    use base64::Engine;
    use sha2::Digest;
    let verifier = "a-verifier-of-the-client-that-is-long-enough-to-be-one";
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier));
    let query =
        format!("redirect_to=http://app.test/cb&code_challenge={challenge}&code_challenge_method=s256");
    let (status, to) = through_provider(base, &query, &login("dee", base));
    assert_eq!(status, 302);
    let code = to.strip_prefix("http://app.test/cb?code=").unwrap_or_else(|| panic!("{to}"));
    let (status, refused) = auth(
        base,
        "/auth/v1/token?grant_type=pkce",
        json!({"auth_code": code, "code_verifier": "someone-else-s-verifier-that-is-also-long-enough"}),
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error_code"], "bad_code_verifier");

    let (status, to) = through_provider(base, &query, &login("dee", base));
    assert_eq!(status, 302);
    let code = to.strip_prefix("http://app.test/cb?code=").unwrap_or_else(|| panic!("{to}"));
    let (status, session) =
        auth(base, "/auth/v1/token?grant_type=pkce", json!({"auth_code": code, "code_verifier": verifier}));
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["user"]["identities"][0]["provider"], "test");
}

fn refusals_and_forged_states_come_back_as_errors(base: &str) {
    let r = send_to(base, "GET", "/auth/v1/authorize?provider=nope", &[], None);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json(),
        json!({"code": 400, "error_code": "validation_failed", "msg": "Unsupported provider: Provider nope could not be found"})
    );

    let (_, provider) = follow(base, "/auth/v1/authorize?provider=test&redirect_to=http://app.test/x");
    let state = url::Url::parse(&provider)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .expect("a state");
    // The provider's refusal, passed on to the page.
    let (status, to) = follow(
        base,
        &format!("/auth/v1/callback?state={state}&error=access_denied&error_description=No+thanks"),
    );
    assert_eq!(
        (status, to.as_str()),
        (
            302,
            "http://app.test/x#error=access_denied&error_code=access_denied&error_description=No+thanks&sb="
        )
    );
    // A state rowgate did not sign goes back to the site.
    let forged = format!("{}x", &state[..state.len() - 1]);
    let (status, to) = follow(base, &format!("/auth/v1/callback?state={forged}&code=abc"));
    assert_eq!((status, to.as_str()), (
        303,
        "http://app.test/?error=invalid_request&error_code=bad_oauth_state&error_description=OAuth+state+parameter+is+invalid"
    ));
    // A code the provider never gave.
    let (status, to) = follow(base, &format!("/auth/v1/callback?state={state}&code=made-up"));
    assert_eq!(status, 302);
    assert!(to.starts_with("http://app.test/x#error=server_error&error_code=unexpected_failure"), "{to}");
}

fn an_id_token_from_the_provider_signs_in(base: &str) {
    let name = login("eve", base);
    let token = id_token(&name, "the client's nonce");
    let grant = "/auth/v1/token?grant_type=id_token";
    let (status, refused) =
        auth(base, grant, json!({"provider": "test", "id_token": token, "nonce": "another"}));
    assert_eq!(
        (status, refused),
        (400, json!({"error": "invalid nonce", "error_description": "Nonces mismatch"}))
    );
    let (status, refused) = auth(
        base,
        grant,
        json!({"provider": "test", "id_token": format!("{token}x"), "nonce": "the client's nonce"}),
    );
    assert_eq!(
        (status, refused),
        (400, json!({"error": "invalid request", "error_description": "Bad ID token"}))
    );
    let (status, refused) = auth(base, grant, json!({"provider": "nope", "id_token": token}));
    assert_eq!(status, 400, "{refused}");

    let (status, session) =
        auth(base, grant, json!({"provider": "test", "id_token": token, "nonce": "the client's nonce"}));
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["user"]["email"], format!("{name}@example.com"));
    assert_eq!(session["user"]["identities"][0]["provider"], "test");

    let (status, refused) =
        auth(base, grant, json!({"provider": "stranger", "id_token": token, "nonce": "the client's nonce"}));
    assert_eq!(
        (status, refused),
        (
            400,
            json!({"error": "invalid request", "error_description": "Unacceptable audience in id_token: [\"rowgate-test\"]"})
        )
    );
    let (status, mobile) =
        auth(base, grant, json!({"provider": "mobile", "id_token": token, "nonce": "the client's nonce"}));
    assert_eq!(status, 200, "{mobile}");
    assert_eq!(mobile["user"]["id"], session["user"]["id"], "the verified address links the two");

    let settings = send_to(base, "GET", "/auth/v1/settings", &[], None).json();
    assert_eq!(settings["external"]["test"], true);
    assert_eq!(settings["external"]["google"], false);
}

on_both!(supabase_js_signs_in_through_the_provider);

fn an_oauth2_provider_s_userinfo_names_the_user(base: &str) {
    let name = login("max", base);
    let (status, provider) = follow(base, "/auth/v1/authorize?provider=plain&redirect_to=http://app.test/o");
    assert_eq!(status, 302);
    assert!(provider.contains("code_challenge_method=S256") && !provider.contains("nonce="), "{provider}");
    let callback = sign_in_at(&provider, &name, &format!("{base}/auth/v1/callback"));
    let (status, to) = follow(base, &callback);
    assert_eq!(status, 302);
    let session = fragment(&to);
    assert!(session["provider_token"].is_string(), "{to}");
    let user = get_user(base, session["access_token"].as_str().unwrap());
    assert_eq!(user["email"], format!("{name}@example.com"));
    assert_eq!(user["app_metadata"], json!({"provider": "plain", "providers": ["plain"]}));
    assert_eq!(user["identities"][0]["identity_data"]["email_verified"], true);
    assert_eq!(user["identities"][0]["identity_data"]["full_name"], format!("User {name}"));
    let (status, refused) =
        auth(base, "/auth/v1/token?grant_type=id_token", json!({"provider": "plain", "id_token": "a.b.c"}));
    assert_eq!((status, &refused["msg"]), (400, &json!("Provider plain issues no ID tokens")));
}

fn a_provider_may_answer_with_a_posted_form(base: &str) {
    let (status, provider) =
        follow(base, "/auth/v1/authorize?provider=posting&redirect_to=http://app.test/p");
    assert_eq!(status, 302);
    assert!(provider.contains("response_mode=form_post"), "{provider}");
    let answer = sign_in_at(&provider, &login("lee", base), &format!("{base}/auth/v1/callback"));
    let (action, form) = answer.strip_prefix("POST ").and_then(|r| r.split_once(' ')).expect("a posted form");
    assert_eq!(action, format!("{base}/auth/v1/callback"));
    let r = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
        .post(action)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_owned())
        .send()
        .expect("a response");
    assert_eq!(r.status().as_u16(), 302);
    let to = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(to.starts_with("http://app.test/p#access_token="), "{to}");
}

fn a_signed_in_user_links_an_identity_and_unlinks_it(base: &str) {
    let email = format!("{}@example.com", login("ida", base));
    let (status, signed_up) = auth(base, "/auth/v1/signup", json!({"email": email, "password": "ida's own"}));
    assert_eq!(status, 200, "{signed_up}");
    let access = signed_up["access_token"].as_str().unwrap();
    let bearer = format!("Bearer {access}");
    let authorize = "/auth/v1/user/identities/authorize?provider=test&redirect_to=http://app.test/linked&skip_http_redirect=true";
    let r = send_to(base, "GET", authorize, &[("authorization", &bearer)], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let url = r.json()["url"].as_str().expect("a url").to_owned();
    // At the provider, another name than the address's: the identity is added all the same.
    let work = login("ida-at-work", base);
    let callback = sign_in_at(&url, &work, &format!("{base}/auth/v1/callback"));
    let (status, to) = follow(base, &callback);
    assert_eq!(status, 302);
    assert!(to.starts_with("http://app.test/linked#access_token="), "{to}");
    let user = get_user(base, fragment(&to)["access_token"].as_str().unwrap());
    assert_eq!(user["id"], signed_up["user"]["id"]);
    assert_eq!(user["email"], email.as_str());
    assert_eq!(user["app_metadata"]["providers"], json!(["email", "test"]));
    let identities = user["identities"].as_array().unwrap();
    assert_eq!(
        identities.iter().map(|i| i["provider"].as_str().unwrap()).collect::<Vec<_>>(),
        ["email", "test"]
    );

    // The same identity again: refused, back on the page.
    let r = send_to(base, "GET", authorize, &[("authorization", &bearer)], None);
    let callback = sign_in_at(r.json()["url"].as_str().unwrap(), &work, &format!("{base}/auth/v1/callback"));
    let (_, to) = follow(base, &callback);
    assert!(
        to.contains("error_code=identity_already_exists&error_description=Identity+is+already+linked&"),
        "{to}"
    );

    let delete = |id: &str| {
        send_to(
            base,
            "DELETE",
            &format!("/auth/v1/user/identities/{id}"),
            &[("authorization", &bearer)],
            None,
        )
    };
    let r = delete(identities[1]["identity_id"].as_str().unwrap());
    assert_eq!((r.status, r.body.as_str()), (200, "{}"));
    let user = get_user(base, access);
    assert_eq!(user["app_metadata"]["providers"], json!(["email"]));
    assert_eq!(user["identities"].as_array().map(Vec::len), Some(1));
    let r = delete(identities[1]["identity_id"].as_str().unwrap());
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["error_code"], "single_identity_not_deletable");
}

fn an_anonymous_user_becomes_the_identity_s(base: &str) {
    let (status, anonymous) = auth(base, "/auth/v1/signup", json!({}));
    assert_eq!(status, 200, "{anonymous}");
    let bearer = format!("Bearer {}", anonymous["access_token"].as_str().unwrap());
    let name = login("jo", base);
    let token = id_token(&name, "n");
    let (status, session) = call_json(
        base,
        "/auth/v1/token?grant_type=id_token",
        &bearer,
        json!({"provider": "test", "id_token": token, "nonce": "n", "link_identity": true}),
    );
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["user"]["id"], anonymous["user"]["id"]);
    assert_eq!(session["user"]["email"], format!("{name}@example.com"));
    assert_eq!(session["user"]["is_anonymous"], false);
    assert!(session["user"]["email_confirmed_at"].is_string());
    // Without a user's token, no linking.
    let (status, refused) = auth(
        base,
        "/auth/v1/token?grant_type=id_token",
        json!({"provider": "test", "id_token": token, "nonce": "n", "link_identity": true}),
    );
    assert_eq!(
        (status, refused),
        (
            400,
            json!({"error": "invalid request", "error_description": "Linking requires a valid user access token in Authorization"})
        )
    );
}

fn call_json(base: &str, path: &str, bearer: &str, body: Value) -> (u16, Value) {
    let headers = [("content-type", "application/json"), ("authorization", bearer)];
    let r = send_to(base, "POST", path, &headers, Some(&body.to_string()));
    (r.status, r.json())
}

/// tests/js/oauth.test.mjs: the real supabase-js client's `signInWithOAuth` (implicit and PKCE)
/// and `signInWithIdToken` against `base`.
fn supabase_js_signs_in_through_the_provider(base: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    let idp = idp();
    let out = std::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "--test-concurrency=1", "oauth.test.mjs"])
        .current_dir(&dir)
        .env("ROWGATE_URL", base)
        .env("ROWGATE_JWT_SECRET", crate::support::JWT_SECRET)
        .env("OIDC_ISSUER", &idp.issuer)
        .env("OIDC_CLIENT_ID", idp.client_id)
        .env("OIDC_CLIENT_SECRET", idp.secret)
        .output()
        .expect("node is needed for the supabase-js tests");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "supabase-js OAuth tests failed:\n{report}");
}
