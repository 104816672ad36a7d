//! API keys: created, listed and revoked with `rowgate apikey`, checked on every request.

use std::process::Command;
use std::time::{Duration, Instant};

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::support::{default_args, harness, request, request_to, start_server, JWT_SECRET};

const ROWGATE: &str = env!("CARGO_BIN_EXE_rowgate");

/// Runs `rowgate apikey ARGS` against the test database; returns stdout.
fn apikey(args: &[&str]) -> String {
    let out = Command::new(ROWGATE)
        .arg("apikey")
        .args(args)
        .env("ROWGATE_DB_URI", &harness().superuser_uri)
        .output()
        .expect("run rowgate apikey");
    assert!(out.status.success(), "rowgate apikey {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn create(role: &str, name: &str, extra: &[&str]) -> String {
    let mut args = vec!["create", "--role", role, "--name", name];
    args.extend_from_slice(extra);
    apikey(&args).trim().to_owned()
}

#[test]
fn a_key_runs_as_its_role() {
    let key = create("web_user", "reader", &[]);
    assert!(key.starts_with("rg_"));
    for header in ["apikey", "x-api-key", "X-API-Key"] {
        let r = request("GET", "/secrets", &[(header, &key)]);
        assert_eq!(
            (r.status, r.json()),
            (200, json!([{"id": 1, "secret": "the cake is a lie"}])),
            "{header}"
        );
    }
}

#[test]
fn key_claims_reach_row_level_security() {
    let key = create("web_user", "alice-app", &["--claims", r#"{"sub": "alice"}"#]);
    let r = request("GET", "/documents?select=id&order=id", &[("apikey", &key)]);
    assert_eq!(r.json(), json!([{"id": 1}, {"id": 2}, {"id": 4}]));
}

#[test]
fn the_verification_endpoint() {
    let key = create("web_user", "svc", &["--expires", "30d"]);
    let r = request("GET", "/rowgate/apikey", &[("apikey", &key)]);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["name"], "svc");
    assert_eq!(r.json()["role"], "web_user");
    assert!(r.json()["expires_at"].as_str().unwrap().ends_with("+00:00"));
    let r = request("GET", "/rowgate/apikey", &[]);
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("RG010")));
    let r = request("GET", "/rowgate/apikey", &[("apikey", "rg_unknown")]);
    assert_eq!((r.status, r.json()["message"].clone()), (403, json!("Invalid API key")));
}

#[test]
fn unknown_and_expired_keys_are_403() {
    let r = request("GET", "/items?limit=1", &[("apikey", "rg_not-a-key")]);
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!("RG011")));
    let key = create("web_user", "short-lived", &["--expires", "1s"]);
    std::thread::sleep(Duration::from_millis(1100));
    let r = request("GET", "/items?limit=1", &[("apikey", &key)]);
    assert_eq!((r.status, r.json()["message"].clone()), (403, json!("API key expired")));
}

#[test]
fn a_revoke_takes_effect_within_a_second() {
    let key = create("web_user", "to-revoke", &[]);
    // Warm the cache on both servers: the default one and a second one.
    let other = start_server(default_args(&harness().superuser_uri));
    for base in [&harness().base, &other] {
        assert_eq!(request_to(base, "GET", "/secrets", &[("apikey", &key)]).status, 200);
    }
    assert!(apikey(&["list"]).contains("to-revoke"));
    assert!(!apikey(&["list"]).contains(&key), "list never shows a key");
    apikey(&["revoke", "to-revoke"]);
    let revoked_at = Instant::now();
    for base in [&harness().base, &other] {
        loop {
            let r = request_to(base, "GET", "/secrets", &[("apikey", &key)]);
            if r.status == 403 {
                assert_eq!(r.json()["message"], "API key revoked");
                break;
            }
            assert!(revoked_at.elapsed() < Duration::from_secs(1), "still accepted after a second");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_token_names_the_user_and_the_key_must_still_be_valid() {
    let key = create("web_anon", "public-app", &[]);
    let token = encode(
        &Header::new(Algorithm::HS256),
        &json!({"role": "web_user", "sub": "bob"}),
        &EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();
    let bearer = format!("Bearer {token}");
    // The key alone is anonymous: no access to secrets.
    assert_eq!(request("GET", "/secrets", &[("apikey", &key)]).status, 401);
    // With a token, the token's role is used.
    assert_eq!(request("GET", "/secrets", &[("apikey", &key), ("Authorization", &bearer)]).status, 200);
    // A bad key is refused even with a good token.
    assert_eq!(request("GET", "/secrets", &[("apikey", "rg_bad"), ("Authorization", &bearer)]).status, 403);
    // Supabase style: the JWT itself as the apikey.
    assert_eq!(request("GET", "/secrets", &[("apikey", &token)]).status, 200);
}

#[test]
fn required_keys() {
    let mut args = default_args(&harness().superuser_uri);
    args.api_key_required = Some(true);
    let base = start_server(args);
    let r = request_to(&base, "GET", "/items?limit=1", &[]);
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("RG010")));
    let key = create("web_anon", "required", &[]);
    assert_eq!(request_to(&base, "GET", "/items?limit=1", &[("apikey", &key)]).status, 200);
}

/// Runs `rowgate apikey ARGS` on the SQLite file at `path`; returns stdout.
fn apikey_on_sqlite(path: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(ROWGATE)
        .arg("apikey")
        .args(args)
        .arg("--db-uri")
        .arg(format!("sqlite:{}", path.display()))
        .output()
        .expect("run rowgate apikey");
    assert!(out.status.success(), "rowgate apikey {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn keys_work_on_sqlite_too() {
    // An `rg_` key sent to a server on SQLite once went to a PostgreSQL pool with no database.
    let path = tempfile::tempdir().expect("temp dir").keep().join("keys.db");
    let schema = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
                  INSERT INTO notes VALUES (1, 'members only');";
    let base = crate::sqlite::serve_sqlite(
        &path,
        schema,
        "[notes]\nselect = { member = \"true\" }\n",
        Default::default(),
    );
    let r = request_to(&base, "GET", "/notes", &[("apikey", "rg_not-a-key")]);
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!("RG011")), "{}", r.body);
    let key =
        apikey_on_sqlite(&path, &["create", "--role", "member", "--name", "members-app"]).trim().to_owned();
    assert!(key.starts_with("rg_"), "{key}");
    let r = request_to(&base, "GET", "/notes", &[("apikey", &key)]);
    assert_eq!((r.status, r.json()), (200, json!([{"id": 1, "body": "members only"}])), "{}", r.body);
    let r = request_to(&base, "GET", "/rowgate/apikey", &[("apikey", &key)]);
    assert_eq!((r.json()["name"].clone(), r.json()["role"].clone()), (json!("members-app"), json!("member")));
    assert!(apikey_on_sqlite(&path, &["list"]).contains("members-app\tmember\t"));
    apikey_on_sqlite(&path, &["revoke", "members-app"]);
    let revoked_at = Instant::now();
    loop {
        let r = request_to(&base, "GET", "/notes", &[("apikey", &key)]);
        if r.status == 403 {
            assert_eq!(r.json()["message"], "API key revoked");
            break;
        }
        assert!(revoked_at.elapsed() < Duration::from_secs(2), "still accepted after two seconds");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_key_store_and_the_accounts_pin_their_functions_search_path() {
    create("web_user", "pinned", &[]);
    let uri = harness().superuser_uri.clone();
    let unpinned: Vec<String> = crate::support::block_on(async move {
        let config: tokio_postgres::Config = uri.parse().unwrap();
        let client = rowgate::backend::postgres::connect_without_tls(&config).await.unwrap();
        rowgate::backend::postgres::accounts_install::install(&client, "Authenticator").await.unwrap();
        client
            .query(
                "SELECT proname::text FROM pg_proc WHERE pronamespace = 'rowgate'::regnamespace \
                 AND (proname LIKE 'account%' OR proname LIKE '%api_key%') \
                 AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (proconfig), false) ORDER BY 1",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    });
    assert_eq!(unpinned, Vec::<String>::new());
}

#[test]
fn a_users_session_token_is_no_api_key() {
    // With api-key-required, any signed-up user's token passed as the key.
    let mut args = default_args(&harness().superuser_uri);
    args.api_key_required = Some(true);
    let base = start_server(args);
    let token = |role: &str| {
        encode(
            &Header::new(Algorithm::HS256),
            &json!({"role": role}),
            &EncodingKey::from_secret(JWT_SECRET.as_bytes()),
        )
        .unwrap()
    };
    let r = request_to(&base, "GET", "/items?limit=1", &[("apikey", &token("authenticated"))]);
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!("RG011")), "{}", r.body);
    // Supabase's anon key is one.
    assert_eq!(request_to(&base, "GET", "/items?limit=1", &[("apikey", &token("web_anon"))]).status, 200);
    // And with api-key-jwt-roles = *, any role's is.
    let mut args = default_args(&harness().superuser_uri);
    args.api_key_required = Some(true);
    args.api_key_jwt_roles = Some("*".into());
    let base = start_server(args);
    let r = request_to(&base, "GET", "/items?limit=1", &[("apikey", &token("authenticated"))]);
    // (Whatever PostgreSQL then says of that role.)
    assert_ne!(r.json()["code"], json!("RG011"), "{}", r.body);
}
