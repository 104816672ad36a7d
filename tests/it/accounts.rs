//! Built-in accounts (`accounts-enabled`) at Supabase Auth's endpoints, on both backends: the
//! tokens they issue are the ones the API's rules (SQLite) or row-level security (PostgreSQL)
//! read. Every test runs on each.

use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::support::{block_on, default_args, harness, request_to, send_to, sql, start_server};

/// `notes`, each user's own; `vault`, readable only from a session that used a second factor.
pub(crate) const SCHEMA: &str = "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, body TEXT);
    CREATE TABLE vault (id INTEGER PRIMARY KEY, level TEXT NOT NULL DEFAULT 'aal2', secret TEXT);
    INSERT INTO vault (id, secret) VALUES (1, 'the combination');";
pub(crate) const RULES: &str = r#"
[notes]
select = { authenticated = "owner=eq.@jwt.sub" }
insert = { authenticated = "owner=eq.@jwt.sub" }

[vault]
select = { authenticated = "level=eq.@jwt.aal" }
"#;

pub(crate) fn sqlite() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("accounts.db");
        let args = rowgate::config::ServeArgs {
            accounts_enabled: Some(true),
            accounts_anonymous_enabled: Some(true),
            accounts_passkeys_enabled: Some(true),
            accounts_oauth_server_enabled: Some(true),
            accounts_oauth_server_dynamic_registration: Some(true),
            accounts_oauth_server_authorization_path: Some("/oauth/consent".into()),
            ..Default::default()
        };
        crate::sqlite::serve_sqlite(&path, SCHEMA, RULES, args)
    })
}

/// The same table on PostgreSQL, its rows guarded by row-level security on the token's `sub`,
/// and the accounts installed by `rowgate accounts install` for the serving role.
pub(crate) fn postgres() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        sql(r#"
            CREATE SCHEMA accounts_test;
            DO $$ BEGIN CREATE ROLE authenticated NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
            GRANT authenticated TO "Authenticator";
            GRANT USAGE ON SCHEMA accounts_test TO authenticated;
            CREATE TABLE accounts_test.notes (id int PRIMARY KEY, owner text NOT NULL, body text);
            ALTER TABLE accounts_test.notes ENABLE ROW LEVEL SECURITY;
            CREATE POLICY own ON accounts_test.notes
              USING (owner = current_setting('request.jwt.claims', true)::json ->> 'sub')
              WITH CHECK (owner = current_setting('request.jwt.claims', true)::json ->> 'sub');
            GRANT SELECT, INSERT ON accounts_test.notes TO authenticated;
        "#);
        let uri = harness().superuser_uri.clone();
        block_on(async move {
            let client = rowgate::backend::postgres::connect_without_tls(&uri.parse().expect("uri"))
                .await
                .expect("connect");
            rowgate::backend::postgres::accounts_install::install(&client, "Authenticator")
                .await
                .expect("accounts install");
            // Installing again changes nothing.
            rowgate::backend::postgres::accounts_install::install(&client, "Authenticator")
                .await
                .expect("accounts install again");
        });
        // Readable only from a session that used a second factor (auth.jwt() is the install's).
        sql(r#"
            CREATE TABLE accounts_test.vault (id int PRIMARY KEY, secret text);
            INSERT INTO accounts_test.vault VALUES (1, 'the combination');
            ALTER TABLE accounts_test.vault ENABLE ROW LEVEL SECURITY;
            CREATE POLICY second_factor ON accounts_test.vault USING ((auth.jwt() ->> 'aal') = 'aal2');
            GRANT SELECT ON accounts_test.vault TO authenticated;
        "#);
        start_server(rowgate::config::ServeArgs {
            accounts_enabled: Some(true),
            accounts_anonymous_enabled: Some(true),
            accounts_passkeys_enabled: Some(true),
            accounts_oauth_server_enabled: Some(true),
            accounts_oauth_server_dynamic_registration: Some(true),
            accounts_oauth_server_authorization_path: Some("/oauth/consent".into()),
            db_schemas: Some("accounts_test".into()),
            ..default_args(&harness().superuser_uri)
        })
    })
}

/// A token of `role` (no user) signed with the servers' secret.
pub(crate) fn token_of(role: &str) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"role": role, "exp": 4_102_444_800u64}),
        &jsonwebtoken::EncodingKey::from_secret(crate::support::JWT_SECRET.as_bytes()),
    )
    .expect("a token")
}

pub(crate) fn auth(base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = send_to(base, "POST", path, &[("content-type", "application/json")], Some(&body.to_string()));
    let v = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, v)
}

/// [`auth`] from another client: a connection from the loopback address `from`.
fn auth_from(from: [u8; 4], base: &str, path: &str, body: Value) -> (u16, Value) {
    let client = reqwest::blocking::Client::builder()
        .local_address(std::net::IpAddr::from(from))
        .build()
        .expect("a client");
    let r = client
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .expect("a response");
    let status = r.status().as_u16();
    (status, serde_json::from_str(&r.text().unwrap_or_default()).unwrap_or(Value::Null))
}

/// The claims of a JWT (not verified).
pub(crate) fn claims_of(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("base64"))
        .expect("JSON claims")
}

/// A test on each backend: `$name(base)` on the invoking module's `sqlite()` and `postgres()`
/// servers.
macro_rules! on_both {
    ($name:ident) => {
        mod $name {
            #[test]
            fn on_sqlite() {
                super::$name(super::sqlite());
            }
            #[test]
            fn on_postgres() {
                super::$name(super::postgres());
            }
        }
    };
}
pub(crate) use on_both;

on_both!(sign_up_log_in_and_use_the_token_on_the_api);
on_both!(refresh_tokens_rotate_and_one_used_again_at_once_gets_the_same_successor);
on_both!(repeated_login_failures_are_limited);
on_both!(no_number_of_strangers_locks_a_user_out_of_their_own_client);

fn sign_up_log_in_and_use_the_token_on_the_api(base: &str) {
    let (status, session) =
        auth(base, "/auth/v1/signup", json!({"email": "ann@example.com", "password": "correct horse"}));
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["token_type"], "bearer");
    assert_eq!(session["user"]["email"], "ann@example.com");
    assert!(!session.to_string().contains("correct horse"), "the password must never be returned");
    let id = session["user"]["id"].as_str().unwrap().to_owned();
    // One account per address, whatever its case.
    let (status, e) =
        auth(base, "/auth/v1/signup", json!({"email": "ANN@example.com", "password": "whatever1"}));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("user_already_exists")));
    let (status, e) = auth(base, "/auth/v1/signup", json!({"email": "bo@example.com", "password": "123"}));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("weak_password")));

    let (status, e) = auth(
        base,
        "/auth/v1/token?grant_type=password",
        json!({"email": "ann@example.com", "password": "nope"}),
    );
    assert_eq!((status, e["error_code"].as_str()), (400, Some("invalid_credentials")));
    let (status, login) = auth(
        base,
        "/auth/v1/token?grant_type=password",
        json!({"email": "ann@example.com", "password": "correct horse"}),
    );
    assert_eq!(status, 200, "{login}");
    let bearer = format!("Bearer {}", login["access_token"].as_str().unwrap());

    // The API's rules read the token's `sub`.
    let w = send_to(
        base,
        "POST",
        "/notes",
        &[("content-type", "application/json"), ("authorization", &bearer)],
        Some(&json!({"id": 1, "owner": id, "body": "mine"}).to_string()),
    );
    assert_eq!(w.status, 201, "{}", w.body);
    let w = send_to(
        base,
        "POST",
        "/notes",
        &[("content-type", "application/json"), ("authorization", &bearer)],
        Some(&json!({"id": 2, "owner": "someone else", "body": "theirs"}).to_string()),
    );
    assert_eq!((w.status, w.json()["code"].as_str()), (403, Some("42501")), "{}", w.body);
    let r = request_to(base, "GET", "/notes?select=body", &[("authorization", &bearer)]);
    assert_eq!((r.status, r.json()), (200, json!([{"body": "mine"}])), "{}", r.body);
    let r = request_to(base, "GET", "/auth/v1/user", &[("authorization", &bearer)]);
    assert_eq!((r.status, r.json()["id"].as_str()), (200, Some(id.as_str())), "{}", r.body);
    // A session at once and the address confirmed (autoconfirm), as GoTrue's; but its email
    // identity says unverified: no mail has proved it.
    let user = r.json();
    assert!(user["email_confirmed_at"].is_string(), "{}", r.body);
    assert_eq!(user["identities"][0]["identity_data"]["email_verified"], json!(false), "{}", r.body);
    assert_eq!(user["identities"][0]["provider"], "email", "{}", r.body);
    let claims = claims_of(login["access_token"].as_str().unwrap());
    assert_eq!(
        (claims["email"].as_str(), claims["role"].as_str(), claims["aal"].as_str(), &claims["is_anonymous"]),
        (Some("ann@example.com"), Some("authenticated"), Some("aal1"), &json!(false))
    );
    assert!(claims["session_id"].as_str().is_some_and(|s| s.len() == 36), "{claims}");
    // The accounts' own tables are not part of the API.
    for path in ["/_rowgate_users", "/users", "/refresh_tokens"] {
        assert_eq!(request_to(base, "GET", path, &[("authorization", &bearer)]).status, 404, "{path}");
    }
}

fn refresh_tokens_rotate_and_one_used_again_at_once_gets_the_same_successor(base: &str) {
    let (_, session) =
        auth(base, "/auth/v1/signup", json!({"email": "cy@example.com", "password": "secret-cy"}));
    let first = session["refresh_token"].as_str().unwrap().to_owned();
    let (status, renewed) =
        auth(base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": first}));
    assert_eq!(status, 200, "{renewed}");
    let second = renewed["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    // Within the reuse interval (a retry whose answer was lost, another tab): the same
    // successor again, not a second token that would live on beside it.
    let (status, again) =
        auth(base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": first}));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["refresh_token"], json!(second));
    let (status, _) = auth(base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": second}));
    assert_eq!(status, 200);
}

/// A refresh token issued before tokens carried their stamp (stored under its SHA-256 alone)
/// still rotates after the upgrade, and is answered the same way when used again at once.
#[test]
fn a_refresh_token_issued_before_stamps_still_rotates_on_sqlite() {
    use sha2::Digest;
    let path = tempfile::tempdir().expect("temp dir").keep().join("legacy.db");
    let args = rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() };
    let base = crate::sqlite::serve_sqlite(&path, SCHEMA, RULES, args);
    let (_, session) =
        auth(&base, "/auth/v1/signup", json!({"email": "old@example.com", "password": "secret-old"}));
    let legacy = "Jm9yZ2V0LW1lLW5vdC1pdHMtanVzdC1hLXRlc3QtdG9rZW4";
    let hash = rowgate::hex(&sha2::Sha256::digest(legacy));
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute(
            "INSERT INTO _rowgate_refresh_tokens (token_hash, user_id, expires_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![hash, session["user"]["id"].as_str().unwrap(), i64::MAX],
        )
        .expect("a token of the old format");
    let (status, renewed) =
        auth(&base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": legacy}));
    assert_eq!((status, renewed["user"]["email"].as_str()), (200, Some("old@example.com")), "{renewed}");
    let (status, again) =
        auth(&base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": legacy}));
    assert_eq!((status, &again["refresh_token"]), (200, &renewed["refresh_token"]), "{again}");
    let (status, _) = auth(
        &base,
        "/auth/v1/token?grant_type=refresh_token",
        json!({"refresh_token": renewed["refresh_token"]}),
    );
    assert_eq!(status, 200);
    // A stamp that does not match its token is no way in.
    let forged =
        format!("0000000000000000.{}", renewed["refresh_token"].as_str().unwrap().split_once('.').unwrap().1);
    let (status, e) =
        auth(&base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": forged}));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("refresh_token_not_found")));
}

/// After the reuse interval (0 here), a used token presented again revokes them all.
fn a_token_reused_after_the_interval_revokes_them_all(base: &str) {
    let (_, session) =
        auth(base, "/auth/v1/signup", json!({"email": "eve@example.com", "password": "secret-eve"}));
    let first = session["refresh_token"].as_str().unwrap().to_owned();
    let (_, renewed) = auth(base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": first}));
    let second = renewed["refresh_token"].as_str().unwrap().to_owned();
    // The first one again: refused, and the second is revoked with it.
    let (status, e) = auth(base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": first}));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("refresh_token_not_found")));
    let (status, _) = auth(base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": second}));
    assert_eq!(status, 400);
}

mod without_a_reuse_interval {
    use std::sync::OnceLock;

    use rowgate::config::ServeArgs;

    #[test]
    fn on_sqlite() {
        static BASE: OnceLock<String> = OnceLock::new();
        let base = BASE.get_or_init(|| {
            let path = tempfile::tempdir().expect("temp dir").keep().join("strict.db");
            let args = ServeArgs {
                accounts_enabled: Some(true),
                accounts_refresh_reuse_interval: Some(0),
                ..Default::default()
            };
            crate::sqlite::serve_sqlite(&path, super::SCHEMA, super::RULES, args)
        });
        super::a_token_reused_after_the_interval_revokes_them_all(base);
    }

    #[test]
    fn on_postgres() {
        super::postgres(); // the accounts installed
        let base = crate::support::start_server(ServeArgs {
            accounts_enabled: Some(true),
            accounts_refresh_reuse_interval: Some(0),
            db_schemas: Some("accounts_test".into()),
            ..crate::support::default_args(&crate::support::harness().superuser_uri)
        });
        super::a_token_reused_after_the_interval_revokes_them_all(&base);
    }
}

fn repeated_login_failures_are_limited(base: &str) {
    auth(base, "/auth/v1/signup", json!({"email": "dee@example.com", "password": "secret-dee"}));
    for _ in 0..5 {
        let (status, _) = auth(
            base,
            "/auth/v1/token?grant_type=password",
            json!({"email": "dee@example.com", "password": "x"}),
        );
        assert_eq!(status, 400);
    }
    let (status, e) = auth(
        base,
        "/auth/v1/token?grant_type=password",
        json!({"email": "dee@example.com", "password": "secret-dee"}),
    );
    assert_eq!((status, e["error_code"].as_str()), (429, Some("over_request_rate_limit")));
    // Counted for that client alone: a stranger's guesses lock out no one but itself, and dee
    // logs in from her own address.
    let (status, _) = auth_from(
        [127, 0, 0, 2],
        base,
        "/auth/v1/token?grant_type=password",
        json!({"email": "dee@example.com", "password": "secret-dee"}),
    );
    assert_eq!(status, 200);
    // An address longer than an e-mail address can be is refused before anything is counted.
    let long = format!("{}@example.com", "x".repeat(60_000));
    let (status, e) =
        auth(base, "/auth/v1/token?grant_type=password", json!({"email": long, "password": "x"}));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("invalid_credentials")));
}

fn no_number_of_strangers_locks_a_user_out_of_their_own_client(base: &str) {
    let (status, _) =
        auth(base, "/auth/v1/signup", json!({"email": "gail@example.com", "password": "secret-gail"}));
    assert_eq!(status, 200);
    // 25 strangers, 5 wrong passwords each: past what one address may take from everyone.
    // Five at a time (past 16 at once, logins of one address wait their turn uncounted).
    let strangers: Vec<_> = (0..5u8)
        .map(|t| {
            let base = base.to_owned();
            std::thread::spawn(move || {
                for n in (10 + 5 * t)..(15 + 5 * t) {
                    for _ in 0..5 {
                        let wrong = json!({"email": "gail@example.com", "password": "guess"});
                        let (status, _) =
                            auth_from([127, 0, 0, n], &base, "/auth/v1/token?grant_type=password", wrong);
                        // Refused once the address has taken 100 wrong passwords.
                        assert!(status == 400 || status == 429, "{status}");
                    }
                }
            })
        })
        .collect();
    for s in strangers {
        s.join().unwrap();
    }
    let login = json!({"email": "gail@example.com", "password": "secret-gail"});
    // A client gail never used is refused for now; the one she signed up from is not.
    let (status, e) = auth_from([127, 0, 0, 40], base, "/auth/v1/token?grant_type=password", login.clone());
    assert_eq!((status, e["error_code"].as_str()), (429, Some("over_request_rate_limit")));
    let (status, session) = auth(base, "/auth/v1/token?grant_type=password", login);
    assert_eq!(status, 200, "{session}");
}

#[test]
fn install_refuses_accounts_tables_someone_else_made_first() {
    // In a database of its own: another role made `rowgate.users` before the install.
    sql("DROP DATABASE IF EXISTS accounts_squatted");
    sql("CREATE DATABASE accounts_squatted");
    let uri = harness().superuser_uri.clone();
    let mut cfg: tokio_postgres::Config = uri.parse().expect("uri");
    cfg.dbname("accounts_squatted");
    let error = block_on(async move {
        let client = rowgate::backend::postgres::connect_without_tls(&cfg).await.expect("connect");
        client
            .batch_execute(
                "DO $$ BEGIN CREATE ROLE squatter NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
                 CREATE SCHEMA rowgate;
                 CREATE TABLE rowgate.users (id text PRIMARY KEY, email text, password_hash text, created_at text);
                 ALTER TABLE rowgate.users OWNER TO squatter;",
            )
            .await
            .expect("set-up");
        rowgate::backend::postgres::accounts_install::install(&client, "Authenticator")
            .await
            .expect_err("a squatted table")
    });
    assert!(error.contains("belong to squatter"), "{error}");
}

#[test]
fn sign_up_can_be_turned_off_and_is_limited_per_client() {
    let serve = |extra: rowgate::config::ServeArgs| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("signups.db");
        crate::sqlite::serve_sqlite(
            &path,
            SCHEMA,
            RULES,
            rowgate::config::ServeArgs { accounts_enabled: Some(true), ..extra },
        )
    };
    let closed =
        serve(rowgate::config::ServeArgs { accounts_signup_enabled: Some(false), ..Default::default() });
    let (status, e) =
        auth(&closed, "/auth/v1/signup", json!({"email": "hal@example.com", "password": "secret-hal"}));
    assert_eq!(
        (status, e),
        (
            422,
            json!({"code": 422, "error_code": "signup_disabled", "msg": "Signups not allowed for this instance"})
        )
    );
    let limited = serve(rowgate::config::ServeArgs {
        accounts_signup_rate_limit: Some("2/min".into()),
        ..Default::default()
    });
    for n in 0..2 {
        let (status, _) = auth(
            &limited,
            "/auth/v1/signup",
            json!({"email": format!("u{n}@example.com"), "password": "secret-u"}),
        );
        assert_eq!(status, 200);
    }
    let (status, e) =
        auth(&limited, "/auth/v1/signup", json!({"email": "u2@example.com", "password": "secret-u"}));
    assert_eq!((status, e["error_code"].as_str()), (429, Some("over_request_rate_limit")));
    let (status, _) = auth_from(
        [127, 0, 0, 7],
        &limited,
        "/auth/v1/signup",
        json!({"email": "u3@example.com", "password": "secret-u"}),
    );
    assert_eq!(status, 200);
}
