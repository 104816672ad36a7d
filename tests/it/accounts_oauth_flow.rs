//! rowgate as an OAuth 2.1 server, on both backends: the authorization code flow with PKCE
//! (authorize, consent, token, userinfo) as an application and its user go through it, a user's
//! grants, refusals, and OpenID Connect ID tokens.

use serde_json::{json, Value};

use crate::accounts::{on_both, postgres, sqlite, token_of};
use crate::accounts_oauth_server::call;
use crate::support::send_to;

on_both!(an_application_signs_a_user_in_with_the_authorization_code_flow);
on_both!(a_bad_authorization_request_goes_back_to_the_application_only_when_it_can);

/// A client making requests without following redirects.
fn browser() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
}

/// A PKCE verifier and its S256 challenge.
fn pkce(seed: &str) -> (String, String) {
    use base64::Engine;
    use sha2::Digest;
    let verifier = format!("{seed}-verifier-{}", "v".repeat(43));
    let challenge =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// `GET /auth/v1/oauth/authorize?query`: its status and `Location`.
fn authorize(base: &str, query: &[(&str, &str)]) -> (u16, String) {
    let r = browser().get(format!("{base}/auth/v1/oauth/authorize")).query(query).send().expect("a response");
    let location = r.headers().get("location").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let status = r.status().as_u16();
    (status, if status == 302 { location } else { r.text().unwrap() })
}

/// The query pairs of a URL.
fn query_of(url: &str) -> Value {
    let url = reqwest::Url::parse(url).expect("a URL");
    Value::Object(url.query_pairs().map(|(k, v)| (k.into_owned(), Value::from(v.into_owned()))).collect())
}

/// `POST /auth/v1/oauth/token` with a form, as an OAuth client library sends it, and HTTP Basic
/// credentials if given.
fn token(base: &str, form: &[(&str, &str)], basic: Option<(&str, &str)>) -> (u16, Value) {
    let mut request = browser().post(format!("{base}/auth/v1/oauth/token")).form(form);
    if let Some((id, secret)) = basic {
        request = request.basic_auth(id, Some(secret));
    }
    let r = request.send().expect("a response");
    let status = r.status().as_u16();
    (status, serde_json::from_str(&r.text().expect("a body")).expect("JSON"))
}

fn claims(token: &str) -> Value {
    crate::accounts::claims_of(token)
}

fn an_application_signs_a_user_in_with_the_authorization_code_flow(base: &str) {
    let admin = token_of("service_role");
    let port = base.rsplit(':').next().unwrap();
    let (_, client) = call(
        base,
        "POST",
        "/auth/v1/admin/oauth/clients",
        Some(&admin),
        Some(json!({"client_name": "Notes CLI", "redirect_uris": ["http://localhost:8765/cb"]})),
    );
    let (client_id, secret) =
        (client["client_id"].as_str().unwrap(), client["client_secret"].as_str().unwrap());
    let email = format!("ola-{port}@example.com");
    let (status, user) = crate::accounts::auth(
        base,
        "/auth/v1/signup",
        json!({"email": email, "password": "ola's secret", "data": {"name": "Ola N", "avatar_url": "https://x.test/o.png"}}),
    );
    assert_eq!(status, 200, "{user}");
    let bearer = user["access_token"].as_str().unwrap().to_owned();
    let user_id = user["user"]["id"].as_str().unwrap().to_owned();

    // The application sends the browser to rowgate, which sends it to the site's consent page.
    let (verifier, challenge) = pkce("ola");
    let ask = |scope: &str, state: &str| {
        authorize(
            base,
            &[
                ("client_id", client_id),
                ("redirect_uri", "http://localhost:8765/cb"),
                ("response_type", "code"),
                ("scope", scope),
                ("state", state),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ],
        )
    };
    let (status, consent_page) = ask("openid email profile", "s-1");
    assert_eq!(status, 302, "{consent_page}");
    assert!(
        consent_page.starts_with("http://localhost:3000/oauth/consent?authorization_id="),
        "{consent_page}"
    );
    let authorization_id = query_of(&consent_page)["authorization_id"].as_str().unwrap().to_owned();

    // The consent page reads the request as its user, and approves it.
    let path = format!("/auth/v1/oauth/authorizations/{authorization_id}");
    let (status, details) = call(base, "GET", &path, Some(&bearer), None);
    assert_eq!(
        (status, details),
        (
            200,
            json!({
                "authorization_id": authorization_id, "redirect_uri": "http://localhost:8765/cb",
                "client": {"id": client_id, "name": "Notes CLI"},
                "user": {"id": user_id, "email": email}, "scope": "openid email profile",
            })
        )
    );
    // Another user cannot take it over.
    let (_, other) = crate::accounts::auth(
        base,
        "/auth/v1/signup",
        json!({"email": format!("kai-{port}@example.com"), "password": "kai's secret"}),
    );
    let (status, e) = call(base, "GET", &path, Some(other["access_token"].as_str().unwrap()), None);
    assert_eq!(
        (status, e),
        (
            404,
            json!({"code": 404, "error_code": "oauth_authorization_not_found", "msg": "authorization not found"})
        )
    );
    let (status, answer) =
        call(base, "POST", &format!("{path}/consent"), Some(&bearer), Some(json!({"action": "approve"})));
    assert_eq!(status, 200, "{answer}");
    let redirect = answer["redirect_url"].as_str().unwrap();
    assert!(redirect.starts_with("http://localhost:8765/cb?code="), "{redirect}");
    let back = query_of(redirect);
    assert_eq!(back["state"], "s-1");
    let code = back["code"].as_str().unwrap().to_owned();
    // Decided: the request is done.
    let (status, e) =
        call(base, "POST", &format!("{path}/consent"), Some(&bearer), Some(json!({"action": "deny"})));
    assert_eq!((status, &e["msg"]), (400, &json!("authorization request cannot be processed")));

    // The application exchanges the code, once, proving itself and the verifier.
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", "http://localhost:8765/cb"),
        ("code_verifier", verifier.as_str()),
    ];
    let (status, e) = token(base, &exchange, Some((client_id, "not the secret")));
    assert_eq!(
        (status, e),
        (400, json!({"code": 400, "error_code": "invalid_credentials", "msg": "invalid client credentials"}))
    );
    let mut wrong_verifier = exchange;
    wrong_verifier[3] = ("code_verifier", "a-wrong-verifier-of-enough-length-to-be-one-at-all");
    let (status, e) = token(base, &wrong_verifier, Some((client_id, secret)));
    assert_eq!(
        (status, e),
        (
            400,
            json!({"error": "invalid_grant", "error_description": "PKCE verification failed: code challenge does not match"})
        )
    );
    // A code tried with the wrong verifier is used up.
    let (status, e) = token(base, &exchange, Some((client_id, secret)));
    assert_eq!(
        (status, e),
        (400, json!({"error": "invalid_grant", "error_description": "Invalid authorization code"}))
    );
    // Whoever else holds a code cannot use it, nor use it up.
    let (_, stranger) = call(
        base,
        "POST",
        "/auth/v1/oauth/clients/register",
        None,
        Some(json!({"redirect_uris": ["http://localhost:9/cb"], "token_endpoint_auth_method": "none"})),
    );
    let (_, consent_page) = ask("openid email profile", "s-1b");
    let authorization_id = query_of(&consent_page)["authorization_id"].as_str().unwrap().to_owned();
    let (_, answer) =
        call(base, "GET", &format!("/auth/v1/oauth/authorizations/{authorization_id}"), Some(&bearer), None);
    let code = query_of(answer["redirect_url"].as_str().unwrap())["code"].as_str().unwrap().to_owned();
    let mut stolen = exchange;
    stolen[1] = ("code", code.as_str());
    let mut as_stranger = stolen.to_vec();
    as_stranger.push(("client_id", stranger["client_id"].as_str().unwrap()));
    let (status, e) = token(base, &as_stranger, None);
    assert_eq!(
        (status, e),
        (400, json!({"error": "invalid_grant", "error_description": "Invalid authorization code"}))
    );
    let (status, _) = token(base, &stolen, Some((client_id, secret)));
    assert_eq!(status, 200);

    // Again, right the first time.
    let (_, consent_page) = ask("openid email profile", "s-2");
    let authorization_id = query_of(&consent_page)["authorization_id"].as_str().unwrap().to_owned();
    let path = format!("/auth/v1/oauth/authorizations/{authorization_id}");
    // Consented before: approved at once.
    let (status, answer) = call(base, "GET", &path, Some(&bearer), None);
    assert_eq!(status, 200, "{answer}");
    let back = query_of(answer["redirect_url"].as_str().expect("approved at once"));
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", back["code"].as_str().unwrap()),
        ("redirect_uri", "http://localhost:8765/cb"),
        ("code_verifier", verifier.as_str()),
    ];
    let (status, tokens) = token(base, &exchange, Some((client_id, secret)));
    assert_eq!(status, 200, "{tokens}");
    let mut keys: Vec<&str> = tokens.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["access_token", "expires_in", "refresh_token", "token_type"],
        "no ID token with an HMAC key"
    );
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let c = claims(&access);
    assert_eq!(
        (&c["sub"], &c["client_id"], &c["scope"], &c["role"], &c["amr"][0]["method"]),
        (
            &json!(user_id),
            &json!(client_id),
            &json!("openid email profile"),
            &json!("authenticated"),
            &json!("oauth_provider/authorization_code")
        )
    );

    // What its scopes let it read of the user.
    let (status, info) = call(base, "GET", "/auth/v1/oauth/userinfo", Some(&access), None);
    assert_eq!(status, 200, "{info}");
    assert_eq!(
        (&info["sub"], &info["email"], &info["name"], &info["picture"], &info["user_metadata"]["name"]),
        (&json!(user_id), &json!(email), &json!("Ola N"), &json!("https://x.test/o.png"), &json!("Ola N"))
    );
    let (_, info) = call(base, "GET", "/auth/v1/oauth/userinfo", Some(&bearer), None);
    assert_eq!(info, json!({"sub": user_id}), "a token of no application's: sub alone");

    // Only the application refreshes its session, and only at its token endpoint.
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    let (status, e) = crate::accounts::auth(
        base,
        "/auth/v1/token?grant_type=refresh_token",
        json!({"refresh_token": refresh}),
    );
    assert_eq!((status, &e["error_code"]), (400, &json!("refresh_token_not_found")));
    let (status, refreshed) = token(
        base,
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
        Some((client_id, secret)),
    );
    assert_eq!(status, 200, "{refreshed}");
    assert_eq!(claims(refreshed["access_token"].as_str().unwrap())["client_id"], json!(client_id));

    // An application's token decides nothing for its user, nor changes the account.
    let (_, consent_page) = ask("email email", "s-3");
    let authorization_id = query_of(&consent_page)["authorization_id"].as_str().unwrap().to_owned();
    let path = format!("/auth/v1/oauth/authorizations/{authorization_id}");
    let refused = json!({"code": 403, "error_code": "insufficient_scope",
                         "msg": "An application's token cannot do this for its user"});
    assert_eq!(call(base, "GET", &path, Some(&access), None), (403, refused.clone()));
    let taking_over = json!({"password": "the app's now", "email": "app@evil.example"});
    assert_eq!(call(base, "PUT", "/auth/v1/user", Some(&access), Some(taking_over)), (403, refused.clone()));
    let factor = json!({"factor_type": "totp"});
    assert_eq!(call(base, "POST", "/auth/v1/factors", Some(&access), Some(factor)), (403, refused.clone()));
    assert_eq!(call(base, "POST", "/auth/v1/logout", Some(&access), None), (403, refused));
    // Nor does a page the site does not allow.
    let r = send_to(
        base,
        "GET",
        &path,
        &[("authorization", &format!("Bearer {bearer}")), ("origin", "https://evil.example")],
        None,
    );
    assert_eq!((r.status, &r.json()["msg"]), (400, &json!("unauthorized request origin")));

    // The user's grants: listed, and revoked with the application's sessions.
    let (status, grants) = call(base, "GET", "/auth/v1/user/oauth/grants", Some(&bearer), None);
    assert_eq!(status, 200);
    assert_eq!(
        (&grants[0]["client"], &grants[0]["scopes"], grants.as_array().unwrap().len()),
        (&json!({"id": client_id, "name": "Notes CLI"}), &json!(["openid", "email", "profile"]), 1)
    );
    let revoke = format!("/auth/v1/user/oauth/grants?client_id={client_id}");
    let (status, _) = call(base, "DELETE", &revoke, Some(&bearer), None);
    assert_eq!(status, 204);
    let (status, e) = token(
        base,
        &[("grant_type", "refresh_token"), ("refresh_token", refreshed["refresh_token"].as_str().unwrap())],
        Some((client_id, secret)),
    );
    assert_eq!(
        (status, e),
        (400, json!({"error": "invalid_grant", "error_description": "Invalid Refresh Token"}))
    );
    let (_, grants) = call(base, "GET", "/auth/v1/user/oauth/grants", Some(&bearer), None);
    assert_eq!(grants, json!([]));
    let (status, e) = call(base, "DELETE", &revoke, Some(&bearer), None);
    assert_eq!((status, &e["error_code"]), (404, &json!("oauth_consent_not_found")));

    // Revoked: asked again. Denied, the application hears so.
    let (status, details) = call(base, "GET", &path, Some(&bearer), None);
    assert_eq!((status, &details["scope"]), (200, &json!("email")));
    let (_, answer) =
        call(base, "POST", &format!("{path}/consent"), Some(&bearer), Some(json!({"action": "deny"})));
    assert_eq!(
        query_of(answer["redirect_url"].as_str().unwrap()),
        json!({"error": "access_denied", "error_description": "User denied the request", "state": "s-3"})
    );
}

fn a_bad_authorization_request_goes_back_to_the_application_only_when_it_can(base: &str) {
    let admin = token_of("service_role");
    let (_, client) = call(
        base,
        "POST",
        "/auth/v1/admin/oauth/clients",
        Some(&admin),
        Some(
            json!({"client_name": "SPA", "redirect_uris": ["https://spa.example.com/cb"], "client_type": "public"}),
        ),
    );
    let client_id = client["client_id"].as_str().unwrap();
    let (_, challenge) = pkce("spa");
    let good = [
        ("client_id", client_id),
        ("redirect_uri", "https://spa.example.com/cb"),
        ("state", "st"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    // Neither the client nor the redirect URI can be trusted: no redirect.
    let mut wrong = good;
    wrong[1] = ("redirect_uri", "https://evil.example/cb");
    let (status, body) = authorize(base, &wrong);
    assert_eq!(
        (status, serde_json::from_str::<Value>(&body).unwrap()),
        (400, json!({"code": 400, "error_code": "validation_failed", "msg": "invalid redirect_uri"}))
    );
    wrong = good;
    wrong[0] = ("client_id", "00000000-0000-4000-8000-000000000000");
    let (status, body) = authorize(base, &wrong);
    assert_eq!(
        (status, serde_json::from_str::<Value>(&body).unwrap()["error_code"].clone()),
        (400, json!("oauth_client_not_found"))
    );
    // Anything else goes back with the OAuth error.
    for (pair, description) in [
        (("code_challenge_method", "md5"), "code_challenge_method must be 'S256' or 'plain'"),
        (("code_challenge", "short"), "code_challenge must be between 43 and 128 characters"),
    ] {
        let mut bad = good.to_vec();
        bad.retain(|(k, _)| *k != pair.0);
        bad.push(pair);
        let (status, location) = authorize(base, &bad);
        assert_eq!(status, 302);
        assert!(location.starts_with("https://spa.example.com/cb?"), "{location}");
        assert_eq!(
            query_of(&location),
            json!({"error": "invalid_request", "error_description": description, "state": "st"})
        );
    }
    let mut bad = good.to_vec();
    bad.push(("scope", "email admin"));
    let (_, location) = authorize(base, &bad);
    assert_eq!(query_of(&location)["error_description"], "unsupported scope: admin");
    let mut bad = good.to_vec();
    bad[2] = ("state", "st\0");
    let (_, location) = authorize(base, &bad);
    assert_eq!(query_of(&location)["error_description"], "state must not contain NUL characters");
    // What the consent page shows as links is a web page's address, never a script.
    let (status, e) = call(
        base,
        "POST",
        "/auth/v1/oauth/clients/register",
        None,
        Some(
            json!({"redirect_uris": ["https://x.example/cb"], "client_uri": "javascript:alert(document.cookie)"}),
        ),
    );
    assert_eq!((status, &e["msg"]), (400, &json!("client_uri must be a valid URL")));

    // A public client proves itself with its id and the verifier alone.
    let (verifier, challenge) = pkce("spa");
    let mut ask = good.to_vec();
    ask[3] = ("code_challenge", challenge.as_str());
    let (_, page) = authorize(base, &ask);
    let authorization_id = query_of(&page)["authorization_id"].as_str().unwrap().to_owned();
    let port = base.rsplit(':').next().unwrap();
    let (_, user) = crate::accounts::auth(
        base,
        "/auth/v1/signup",
        json!({"email": format!("spa-{port}@example.com"), "password": "spa user's secret"}),
    );
    let bearer = user["access_token"].as_str().unwrap();
    let path = format!("/auth/v1/oauth/authorizations/{authorization_id}");
    // Answered only once its user has read it.
    let (status, e) =
        call(base, "POST", &format!("{path}/consent"), Some(bearer), Some(json!({"action": "approve"})));
    assert_eq!((status, &e["error_code"]), (404, &json!("oauth_authorization_not_found")));
    call(base, "GET", &path, Some(bearer), None);
    let (_, answer) =
        call(base, "POST", &format!("{path}/consent"), Some(bearer), Some(json!({"action": "approve"})));
    let code = query_of(answer["redirect_url"].as_str().unwrap())["code"].as_str().unwrap().to_owned();
    let (status, tokens) = token(
        base,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &verifier),
            ("client_id", client_id),
        ],
        None,
    );
    assert_eq!(
        (status, &claims(tokens["access_token"].as_str().unwrap())["scope"]),
        (200, &json!("email")),
        "{tokens}"
    );

    // The server describes itself.
    let (status, metadata) = call(base, "GET", "/auth/v1/.well-known/oauth-authorization-server", None, None);
    assert_eq!(status, 200);
    let issuer = metadata["issuer"].as_str().unwrap();
    assert_eq!(
        (
            &metadata["token_endpoint"],
            &metadata["registration_endpoint"],
            &metadata["code_challenge_methods_supported"]
        ),
        (
            &json!(format!("{issuer}/oauth/token")),
            &json!(format!("{issuer}/oauth/clients/register")),
            &json!(["S256", "plain"])
        )
    );
}

/// With a key pair signing tokens and the `openid` scope, the code's exchange also gives an
/// OpenID Connect ID token, checked with the published key.
#[test]
fn an_openid_scope_gets_an_id_token_signed_with_the_published_key() {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    std::fs::write(dir.join("key.pem"), crate::accounts_users::NEW_KEY).expect("a key file");
    let args = rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        accounts_signing_keys: Some(format!("@{}", dir.join("key.pem").display())),
        accounts_oauth_server_enabled: Some(true),
        accounts_oauth_server_authorization_path: Some("consent".into()),
        accounts_refresh_reuse_interval: Some(0),
        ..Default::default()
    };
    let base = crate::sqlite::serve_sqlite(
        &dir.join("oidc.db"),
        crate::accounts::SCHEMA,
        crate::accounts::RULES,
        args,
    );
    let (_, client) = call(
        &base,
        "POST",
        "/auth/v1/admin/oauth/clients",
        Some(&token_of("service_role")),
        Some(
            json!({"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "client_secret_post"}),
        ),
    );
    let (client_id, secret) =
        (client["client_id"].as_str().unwrap(), client["client_secret"].as_str().unwrap());
    let (_, user) = crate::accounts::auth(
        &base,
        "/auth/v1/signup",
        json!({"email": "ida@example.com", "password": "ida's secret"}),
    );
    let (verifier, challenge) = pkce("ida");
    let (_, page) = authorize(
        &base,
        &[
            ("client_id", client_id),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
            ("scope", "openid email"),
            ("nonce", "n-0S6"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ],
    );
    assert!(page.starts_with("http://localhost:3000/consent?authorization_id="), "{page}");
    let path =
        format!("/auth/v1/oauth/authorizations/{}", query_of(&page)["authorization_id"].as_str().unwrap());
    let (status, details) = call(&base, "GET", &path, user["access_token"].as_str(), None);
    assert_eq!(status, 200, "{details}");
    let consent = format!("{path}/consent");
    let (_, answer) =
        call(&base, "POST", &consent, user["access_token"].as_str(), Some(json!({"action": "approve"})));
    let code = query_of(answer["redirect_url"].as_str().unwrap())["code"].as_str().unwrap().to_owned();
    let (status, tokens) = token(
        &base,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &verifier),
            ("client_id", client_id),
            ("client_secret", secret),
        ],
        None,
    );
    assert_eq!(status, 200, "{tokens}");
    let id_token = tokens["id_token"].as_str().expect("an ID token");
    let jwks: jsonwebtoken::jwk::JwkSet =
        serde_json::from_str(&send_to(&base, "GET", "/auth/v1/.well-known/jwks.json", &[], None).body)
            .unwrap();
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwks.keys[0]).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[client_id]);
    let checked =
        jsonwebtoken::decode::<Value>(id_token, &key, &validation).expect("a valid ID token").claims;
    assert_eq!(
        (&checked["sub"], &checked["nonce"], &checked["email"], &checked["email_verified"]),
        (&user["user"]["id"], &json!("n-0S6"), &json!("ida@example.com"), &json!(true))
    );
    assert!(checked["iss"].as_str().unwrap().ends_with("/auth/v1"), "{checked}");
    // It says who the user is; it is no credential of theirs.
    let (status, e) = call(&base, "GET", "/auth/v1/user", Some(id_token), None);
    assert_eq!((status, &e["error_code"]), (403, &json!("bad_jwt")), "{e}");
    let r = send_to(&base, "GET", "/notes", &[("authorization", &format!("Bearer {id_token}"))], None);
    assert_eq!(r.status, 401, "{}", r.body);

    // A refresh token the application uses twice ends its own session, not its user's others
    // (the reuse interval is 0 here).
    let refresh = |refresh_token: &str| {
        token(
            &base,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
                ("client_id", client_id),
                ("client_secret", secret),
            ],
            None,
        )
    };
    let first = tokens["refresh_token"].as_str().unwrap();
    let (status, second) = refresh(first);
    assert_eq!(status, 200, "{second}");
    assert_eq!(refresh(first).0, 400);
    assert_eq!(refresh(second["refresh_token"].as_str().unwrap()).0, 400, "the replayed session is over");
    let (status, own) = crate::accounts::auth(
        &base,
        "/auth/v1/token?grant_type=refresh_token",
        json!({"refresh_token": user["refresh_token"]}),
    );
    assert_eq!(status, 200, "the user's own session lives on: {own}");
}
