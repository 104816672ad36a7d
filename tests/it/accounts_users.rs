//! The accounts' users, as GoTrue serves them, on both backends: a user's own account
//! (`GET/PUT /user`), signing out by scope, anonymous users, and the admin API; on PostgreSQL,
//! the accounts in Supabase's `auth.users`, where a schema's foreign keys, triggers and
//! `auth.uid()` policies see them; and accounts made before either moved over on upgrade.

use serde_json::{json, Value};

use crate::accounts::{auth, claims_of, on_both, postgres, sqlite, token_of};
use crate::support::{block_on, default_args, harness, request_to, send_to, sql, start_server, JWT_SECRET};

on_both!(a_user_reads_and_changes_their_own_account);
on_both!(signing_out_ends_the_sessions_its_scope_names);
on_both!(anonymous_users_sign_in_and_become_permanent_with_an_address);
on_both!(the_admin_api_manages_users_for_the_service_role);
on_both!(what_is_not_built_answers_as_a_gotrue_without_it);
on_both!(a_soft_deleted_user_is_gone_but_its_row_stays);

/// `method path` with a JSON body and a bearer token.
fn call(base: &str, method: &str, path: &str, bearer: &str, body: Option<Value>) -> (u16, Value) {
    let authorization = format!("Bearer {bearer}");
    let body = body.map(|b| b.to_string());
    let r = send_to(
        base,
        method,
        path,
        &[("content-type", "application/json"), ("authorization", &authorization)],
        body.as_deref(),
    );
    let v = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, v)
}

fn sign_up(base: &str, email: &str, password: &str, data: Value) -> Value {
    let (status, session) =
        auth(base, "/auth/v1/signup", json!({"email": email, "password": password, "data": data}));
    assert_eq!(status, 200, "{session}");
    session
}

fn log_in(base: &str, email: &str, password: &str) -> (u16, Value) {
    auth(base, "/auth/v1/token?grant_type=password", json!({"email": email, "password": password}))
}

fn refresh(base: &str, session: &Value) -> (u16, Value) {
    auth(base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": session["refresh_token"]}))
}

fn access(session: &Value) -> &str {
    session["access_token"].as_str().expect("an access token")
}

/// A unique address for one run of one test on one backend.
fn address(name: &str, base: &str) -> String {
    let port = base.rsplit(':').next().unwrap_or("0");
    format!("{name}-{port}@example.com")
}

fn a_user_reads_and_changes_their_own_account(base: &str) {
    let (flo, other) = (address("flo", base), address("flo-other", base));
    let session = sign_up(base, &flo, "secret-flo", json!({"name": "Flo", "lang": "nb"}));
    assert_eq!(session["user"]["user_metadata"], json!({"name": "Flo", "lang": "nb"}));
    sign_up(base, &other, "secret-other", json!({}));
    let bearer = access(&session).to_owned();

    let r = request_to(base, "GET", "/auth/v1/user", &[]);
    assert_eq!(
        (r.status, r.json()),
        (
            401,
            json!({"code": 401, "error_code": "no_authorization", "msg": "This endpoint requires a valid Bearer token"})
        )
    );
    let (status, e) = call(base, "GET", "/auth/v1/user", "not.a.token", None);
    assert_eq!((status, e["error_code"].as_str()), (403, Some("bad_jwt")), "{e}");
    let (status, e) = call(base, "GET", "/auth/v1/user", &token_of("anon"), None);
    assert_eq!((status, &e["msg"]), (403, &json!("invalid claim: missing sub claim")), "{e}");

    // Metadata is merged key by key; a null removes a key.
    let (status, user) =
        call(base, "PUT", "/auth/v1/user", &bearer, Some(json!({"data": {"lang": null, "city": "Oslo"}})));
    assert_eq!((status, &user["user_metadata"]), (200, &json!({"name": "Flo", "city": "Oslo"})), "{user}");
    // ...and rides in the next token.
    let (_, renewed) = refresh(base, &session);
    assert_eq!(claims_of(access(&renewed))["user_metadata"], json!({"name": "Flo", "city": "Oslo"}));

    let (status, e) = call(base, "PUT", "/auth/v1/user", &bearer, Some(json!({"password": "secret-flo"})));
    assert_eq!(
        (status, e),
        (
            422,
            json!({"code": 422, "error_code": "same_password", "msg": "New password should be different from the old password."})
        )
    );
    let (status, e) =
        call(base, "PUT", "/auth/v1/user", &bearer, Some(json!({"app_metadata": {"plan": "pro"}})));
    assert_eq!((status, e["error_code"].as_str()), (403, Some("not_admin")));
    let (status, e) = call(base, "PUT", "/auth/v1/user", &bearer, Some(json!({"email": other})));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("email_exists")), "{e}");
    let (status, e) = call(base, "PUT", "/auth/v1/user", &bearer, Some(json!({"email": "not an address"})));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("validation_failed")), "{e}");

    let (status, user) =
        call(base, "PUT", "/auth/v1/user", &bearer, Some(json!({"password": "new-secret-flo"})));
    assert_eq!(status, 200, "{user}");
    assert_eq!(log_in(base, &flo, "secret-flo").0, 400);
    assert_eq!(log_in(base, &flo, "new-secret-flo").0, 200);

    // A new address is taken only once a mail to it comes back, autoconfirm or not (GoTrue's
    // rule for a permanent user); this server sends no mail.
    let moved = address("flo-moved", base);
    let (status, e) = call(base, "PUT", "/auth/v1/user", &bearer, Some(json!({"email": moved})));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("email_provider_disabled")), "{e}");
    let (status, login) = log_in(base, &flo, "new-secret-flo");
    assert_eq!((status, login["user"]["last_sign_in_at"].is_string()), (200, true), "{login}");
}

fn signing_out_ends_the_sessions_its_scope_names(base: &str) {
    let gus = address("gus", base);
    let a = sign_up(base, &gus, "secret-gus", json!({}));
    let b = log_in(base, &gus, "secret-gus").1;
    let c = log_in(base, &gus, "secret-gus").1;
    let d = log_in(base, &gus, "secret-gus").1;
    assert_ne!(claims_of(access(&a))["session_id"], claims_of(access(&b))["session_id"]);

    let (status, e) = call(base, "POST", "/auth/v1/logout?scope=everywhere", access(&a), None);
    assert_eq!((status, e["error_code"].as_str()), (400, Some("validation_failed")));
    // local: this session only.
    assert_eq!(call(base, "POST", "/auth/v1/logout?scope=local", access(&a), None).0, 204);
    assert_eq!(refresh(base, &a).0, 400);
    let (status, b) = refresh(base, &b);
    assert_eq!(status, 200, "{b}");
    // others: every session but this one (b's refreshed token continues b's session).
    assert_eq!(call(base, "POST", "/auth/v1/logout?scope=others", access(&b), None).0, 204);
    assert_eq!(refresh(base, &c).0, 400);
    let (status, b) = refresh(base, &b);
    assert_eq!(status, 200, "{b}");
    // global (the default): all of them.
    assert_eq!(call(base, "POST", "/auth/v1/logout", access(&d), None).0, 204);
    assert_eq!(refresh(base, &b).0, 400);
    assert_eq!(refresh(base, &d).0, 400);
}

fn anonymous_users_sign_in_and_become_permanent_with_an_address(base: &str) {
    let (status, session) = auth(base, "/auth/v1/signup", json!({"data": {"theme": "dark"}}));
    assert_eq!(status, 200, "{session}");
    let user = &session["user"];
    assert_eq!(
        (
            &user["is_anonymous"],
            &user["email"],
            &user["identities"],
            &user["app_metadata"],
            &user["user_metadata"]
        ),
        (&json!(true), &json!(""), &json!([]), &json!({}), &json!({"theme": "dark"})),
        "{user}"
    );
    let claims = claims_of(access(&session));
    assert_eq!((&claims["is_anonymous"], &claims["role"]), (&json!(true), &json!("authenticated")));
    // A signed-in user to the API, like any other.
    let r = request_to(base, "GET", "/notes", &[("authorization", &format!("Bearer {}", access(&session)))]);
    assert_eq!((r.status, r.json()), (200, json!([])), "{}", r.body);

    let (status, e) =
        call(base, "PUT", "/auth/v1/user", access(&session), Some(json!({"password": "anon-secret"})));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("validation_failed")), "{e}");
    let anna = address("anna", base);
    let (status, user) = call(
        base,
        "PUT",
        "/auth/v1/user",
        access(&session),
        Some(json!({"email": anna, "password": "anon-secret"})),
    );
    assert_eq!(
        (status, &user["is_anonymous"], user["email"].as_str()),
        (200, &json!(false), Some(anna.as_str()))
    );
    assert_eq!(user["app_metadata"], json!({"provider": "email", "providers": ["email"]}));
    let (status, login) = log_in(base, &anna, "anon-secret");
    assert_eq!((status, &login["user"]["id"]), (200, &user["id"]), "{login}");
    assert_eq!(claims_of(access(&login))["is_anonymous"], json!(false));
}

fn the_admin_api_manages_users_for_the_service_role(base: &str) {
    let service = token_of("service_role");
    let ivy = address("ivy", base);
    let user_session = sign_up(base, &address("ivy-user", base), "secret-user", json!({}));
    let (status, e) = call(base, "GET", "/auth/v1/admin/users", access(&user_session), None);
    assert_eq!(
        (status, e),
        (403, json!({"code": 403, "error_code": "not_admin", "msg": "User not allowed"}))
    );
    assert_eq!(request_to(base, "GET", "/auth/v1/admin/users", &[]).status, 401);

    let (status, e) =
        call(base, "POST", "/auth/v1/admin/users", &service, Some(json!({"password": "secret-ivy"})));
    assert_eq!(
        (status, e),
        (
            400,
            json!({"code": 400, "error_code": "validation_failed", "msg": "Cannot create a user without either an email or phone"})
        )
    );
    let (status, user) = call(
        base,
        "POST",
        "/auth/v1/admin/users",
        &service,
        Some(json!({"email": ivy, "password": "secret-ivy", "email_confirm": true,
                    "user_metadata": {"name": "Ivy"}, "app_metadata": {"plan": "pro"}})),
    );
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["app_metadata"], json!({"provider": "email", "providers": ["email"], "plan": "pro"}));
    assert_eq!(
        (user["user_metadata"]["name"].as_str(), user["email_confirmed_at"].is_string()),
        (Some("Ivy"), true)
    );
    let id = user["id"].as_str().unwrap().to_owned();
    let (status, e) = call(base, "POST", "/auth/v1/admin/users", &service, Some(json!({"email": ivy})));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("email_exists")));
    assert_eq!(log_in(base, &ivy, "secret-ivy").0, 200);

    // A page at a time, newest first, with GoTrue's headers.
    let r = send_to(
        base,
        "GET",
        "/auth/v1/admin/users?page=1&per_page=1",
        &[("authorization", &format!("Bearer {service}"))],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let total: u64 = r.header("x-total-count").expect("X-Total-Count").parse().expect("a count");
    assert!(total >= 2, "{total}");
    let link = r.header("link").expect("Link").to_owned();
    assert!(link.starts_with("</auth/v1/admin/users?page=2&per_page=1>; rel=\"next\", "), "{link}");
    assert!(
        link.ends_with(&format!("</auth/v1/admin/users?page={total}&per_page=1>; rel=\"last\"")),
        "{link}"
    );
    assert_eq!(
        (r.json()["users"].as_array().map(Vec::len), &r.json()["aud"]),
        (Some(1), &json!("authenticated"))
    );
    let (status, e) = call(base, "GET", "/auth/v1/admin/users?page=x", &service, None);
    assert_eq!((status, e["error_code"].as_str()), (400, Some("validation_failed")));

    let (status, got) = call(base, "GET", &format!("/auth/v1/admin/users/{id}"), &service, None);
    assert_eq!((status, &got["email"]), (200, &json!(ivy)));
    let (status, e) = call(base, "GET", "/auth/v1/admin/users/not-a-uuid", &service, None);
    assert_eq!((status, e["msg"].as_str()), (404, Some("user_id must be an UUID")));
    let (status, e) =
        call(base, "GET", "/auth/v1/admin/users/00000000-0000-4000-8000-000000000000", &service, None);
    assert_eq!((status, e["error_code"].as_str()), (404, Some("user_not_found")));

    // A ban stops sign-ins and refreshes until it is lifted.
    let (status, banned) = call(
        base,
        "PUT",
        &format!("/auth/v1/admin/users/{id}"),
        &service,
        Some(json!({"ban_duration": "24h"})),
    );
    assert_eq!((status, banned["banned_until"].is_string()), (200, true), "{banned}");
    let (status, e) = log_in(base, &ivy, "secret-ivy");
    assert_eq!((status, e["error_code"].as_str()), (400, Some("user_banned")));
    let (status, e) = call(
        base,
        "PUT",
        &format!("/auth/v1/admin/users/{id}"),
        &service,
        Some(json!({"ban_duration": "1d"})),
    );
    assert_eq!((status, e["error_code"].as_str()), (400, Some("validation_failed")));
    let (status, user) = call(
        base,
        "PUT",
        &format!("/auth/v1/admin/users/{id}"),
        &service,
        Some(json!({"ban_duration": "none", "password": "other-secret-ivy", "app_metadata": {"plan": null}})),
    );
    assert_eq!(
        (status, user.get("banned_until"), &user["app_metadata"]["plan"]),
        (200, None, &Value::Null),
        "{user}"
    );
    assert_eq!(log_in(base, &ivy, "other-secret-ivy").0, 200);

    let (status, body) = call(base, "DELETE", &format!("/auth/v1/admin/users/{id}"), &service, None);
    assert_eq!((status, body), (200, json!({})));
    assert_eq!(log_in(base, &ivy, "other-secret-ivy").0, 400);
    assert_eq!(call(base, "DELETE", &format!("/auth/v1/admin/users/{id}"), &service, None).0, 404);
}

fn a_soft_deleted_user_is_gone_but_its_row_stays(base: &str) {
    let sol = address("sol", base);
    let session = sign_up(base, &sol, "secret-sol", json!({"name": "Sol"}));
    let id = session["user"]["id"].as_str().expect("an id").to_owned();
    let service = token_of("service_role");
    let path = format!("/auth/v1/admin/users/{id}");
    let (status, e) = call(base, "DELETE", &path, &service, Some(json!({"should_soft_delete": "yes"})));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("bad_json")), "{e}");
    assert_eq!(
        call(base, "DELETE", &path, &service, Some(json!({"should_soft_delete": true}))),
        (200, json!({}))
    );
    assert_eq!(call(base, "GET", &path, &service, None).0, 404);
    assert_eq!(log_in(base, &sol, "secret-sol").0, 400);
    assert_eq!(refresh(base, &session).0, 400, "its sessions are gone");
    // The address is free again; deleting the row that stays is still an administrator's to do.
    assert_ne!(sign_up(base, &sol, "secret-sol", json!({}))["user"]["id"], json!(id));
    assert_eq!(
        call(base, "DELETE", &path, &service, Some(json!({"should_soft_delete": true}))),
        (200, json!({}))
    );
    if base == crate::accounts::postgres() {
        let kept = pg_value(&format!(
            "SELECT concat_ws(' ', deleted_at IS NOT NULL, email = '{sol}', encrypted_password IS NULL, \
             raw_user_meta_data::text) FROM auth.users WHERE id = '{id}'"
        ));
        assert_eq!(kept.as_deref(), Some("t f t {}"));
    }
    assert_eq!(call(base, "DELETE", &path, &service, None).0, 200);
    assert_eq!(call(base, "DELETE", &path, &service, None).0, 404);
}

/// One value a superuser's query returns, as text.
pub(crate) fn pg_value(query: &str) -> Option<String> {
    let uri = harness().superuser_uri.clone();
    let query = query.to_owned();
    block_on(async move {
        let client = rowgate::backend::postgres::connect_without_tls(&uri.parse().expect("uri"))
            .await
            .expect("connect");
        client.query_opt(&query, &[]).await.expect("query").and_then(|r| r.get::<_, Option<String>>(0))
    })
}

#[test]
fn on_postgres_the_accounts_are_supabases_auth_users() {
    let base = postgres();
    // A Supabase schema's usual beginning: profiles keyed by auth.users, made on sign-up by a
    // trigger, read under an auth.uid() policy.
    sql(r#"
        CREATE TABLE accounts_test.profiles (
          id uuid PRIMARY KEY REFERENCES auth.users (id) ON DELETE CASCADE,
          full_name text
        );
        CREATE FUNCTION accounts_test.handle_new_user() RETURNS trigger
          LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
          BEGIN
            INSERT INTO accounts_test.profiles (id, full_name) VALUES (new.id, new.raw_user_meta_data ->> 'full_name');
            RETURN new;
          END $$;
        CREATE TRIGGER on_auth_user_created AFTER INSERT ON auth.users
          FOR EACH ROW EXECUTE FUNCTION accounts_test.handle_new_user();
        ALTER TABLE accounts_test.profiles ENABLE ROW LEVEL SECURITY;
        CREATE POLICY own_profile ON accounts_test.profiles USING (id = auth.uid());
        GRANT SELECT ON accounts_test.profiles TO authenticated;
        NOTIFY rowgate, 'reload schema';
    "#);
    let jo = address("jo", base);
    let session = sign_up(base, &jo, "secret-jo", json!({"full_name": "Jo March"}));
    let id = session["user"]["id"].as_str().unwrap().to_owned();
    // Once the reload has seen the new table.
    let bearer = format!("Bearer {}", access(&session));
    let mut r = request_to(base, "GET", "/profiles", &[("authorization", &bearer)]);
    for _ in 0..50 {
        if r.status != 404 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        r = request_to(base, "GET", "/profiles", &[("authorization", &bearer)]);
    }
    assert_eq!((r.status, r.json()), (200, json!([{"id": id, "full_name": "Jo March"}])), "{}", r.body);
    let row = pg_value(&format!(
        "SELECT concat_ws(' ', email, raw_user_meta_data ->> 'full_name', left(encrypted_password, 9), \
         email_confirmed_at IS NOT NULL, (SELECT count(*) FROM auth.identities i WHERE i.user_id = u.id), \
         (SELECT count(*) FROM auth.sessions s WHERE s.user_id = u.id)) FROM auth.users u WHERE id = '{id}'"
    ));
    assert_eq!(row.as_deref(), Some(format!("{jo} Jo March $argon2id t 1 1").as_str()));
    // Deleting the user deletes what references it.
    let service = token_of("service_role");
    assert_eq!(call(base, "DELETE", &format!("/auth/v1/admin/users/{id}"), &service, None).0, 200);
    assert_eq!(
        pg_value(&format!("SELECT count(*)::text FROM accounts_test.profiles WHERE id = '{id}'")).as_deref(),
        Some("0")
    );
}

#[test]
fn on_postgres_accounts_kept_in_schema_rowgate_move_to_auth_users_on_install() {
    use argon2::password_hash::{PasswordHasher, SaltString};
    sql("DROP DATABASE IF EXISTS accounts_upgrade");
    sql("CREATE DATABASE accounts_upgrade");
    let mut cfg: tokio_postgres::Config = harness().superuser_uri.parse().expect("uri");
    cfg.dbname("accounts_upgrade");
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    let argon = argon2::Argon2::default().hash_password(b"secret-kim", &salt).expect("hash").to_string();
    // GoTrue's own hash, as a Supabase project's auth.users holds them.
    let bcrypt = bcrypt::hash("secret-lee", 4).expect("bcrypt");
    let legacy = "bGVnYWN5LXJlZnJlc2gtdG9rZW4tb2YtYS1mb3JtZXItcmVsZWFzZQ";
    let legacy_hash = rowgate::hex(&<sha2::Sha256 as sha2::Digest>::digest(legacy));
    block_on(async move {
        let client = rowgate::backend::postgres::connect_without_tls(&cfg).await.expect("connect");
        client
            .batch_execute(&format!(
                "CREATE SCHEMA rowgate;
                 CREATE TABLE rowgate.users (id text PRIMARY KEY, email text NOT NULL, password_hash text NOT NULL,
                   created_at text NOT NULL DEFAULT '2025-01-02T03:04:05.000Z');
                 CREATE TABLE rowgate.refresh_tokens (token_hash text PRIMARY KEY,
                   user_id text NOT NULL REFERENCES rowgate.users (id) ON DELETE CASCADE,
                   expires_at bigint NOT NULL, revoked boolean NOT NULL DEFAULT false, revoked_at bigint);
                 INSERT INTO rowgate.users (id, email, password_hash)
                   VALUES ('6a1f5c0e-3b1d-4c8e-9f2a-1b2c3d4e5f60', 'Kim@Example.com', '{argon}'),
                          ('7b2e6d1f-4c2e-4d9f-8a3b-2c3d4e5f6071', 'lee@example.com', '{bcrypt}');
                 INSERT INTO rowgate.refresh_tokens (token_hash, user_id, expires_at)
                   VALUES ('{legacy_hash}', '6a1f5c0e-3b1d-4c8e-9f2a-1b2c3d4e5f60', extract(epoch FROM now())::bigint + 86400);"
            ))
            .await
            .expect("a former release's accounts");
        rowgate::backend::postgres::accounts_install::install(&client, "Authenticator")
            .await
            .expect("install");
    });
    let uri = harness().superuser_uri.replace("/postgres", "/accounts_upgrade");
    let mut args = default_args(&uri);
    args.db_schemas = Some("public".into());
    args.accounts_enabled = Some(true);
    let base = start_server(args);
    let (status, kim) = log_in(&base, "kim@example.com", "secret-kim");
    assert_eq!((status, &kim["user"]["email"]), (200, &json!("kim@example.com")), "{kim}");
    assert_eq!(kim["user"]["created_at"], json!("2025-01-02T03:04:05.000000Z"));
    let (status, lee) = log_in(&base, "lee@example.com", "secret-lee");
    assert_eq!(status, 200, "{lee}");
    let (status, renewed) =
        auth(&base, "/auth/v1/token?grant_type=refresh_token", json!({"refresh_token": legacy}));
    assert_eq!((status, &renewed["user"]["email"]), (200, &json!("kim@example.com")), "{renewed}");
}

#[test]
fn on_sqlite_accounts_of_a_former_release_keep_signing_in() {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let path = tempfile::tempdir().expect("temp dir").keep().join("former.db");
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    let argon = argon2::Argon2::default().hash_password(b"secret-max", &salt).expect("hash").to_string();
    let c = rusqlite::Connection::open(&path).expect("create");
    c.execute_batch(
        "CREATE TABLE _rowgate_users (id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE COLLATE NOCASE,
           password_hash TEXT NOT NULL, created_at TEXT NOT NULL);
         CREATE TABLE _rowgate_refresh_tokens (token_hash TEXT PRIMARY KEY,
           user_id TEXT NOT NULL REFERENCES _rowgate_users (id) ON DELETE CASCADE,
           expires_at INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);",
    )
    .expect("a former release's tables");
    c.execute(
        "INSERT INTO _rowgate_users VALUES ('8c3f7e20-5d3f-4ea0-9b4c-3d4e5f607182', 'Max@Example.com', ?1, \
         '2025-01-02T03:04:05.000Z')",
        [&argon],
    )
    .expect("a former account");
    c.execute(
        "INSERT INTO _rowgate_refresh_tokens VALUES ('ab', '8c3f7e20-5d3f-4ea0-9b4c-3d4e5f607182', 9999999999, 0)",
        [],
    )
    .expect("its session");
    drop(c);
    let args = rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() };
    let base = crate::sqlite::serve_sqlite(&path, crate::accounts::SCHEMA, crate::accounts::RULES, args);
    let (status, max) = log_in(&base, "max@example.com", "secret-max");
    assert_eq!(status, 200, "{max}");
    assert_eq!(
        (
            &max["user"]["email"],
            max["user"].get("email_confirmed_at"),
            &max["user"]["identities"][0]["provider"]
        ),
        (&json!("max@example.com"), None, &json!("email"))
    );
    let tokens: i64 = rusqlite::Connection::open(&path)
        .expect("open")
        .query_row("SELECT count(*) FROM _rowgate_refresh_tokens", [], |r| r.get(0))
        .expect("count");
    assert_eq!(tokens, 2, "the former session is kept beside the new one");
}

#[test]
fn on_postgres_a_custom_access_token_hook_adds_claims_or_refuses() {
    postgres(); // the accounts installed
    sql(r#"
        CREATE TABLE accounts_test.user_roles (user_id uuid PRIMARY KEY, role text);
        CREATE FUNCTION accounts_test.custom_access_token_hook(event jsonb) RETURNS jsonb
          LANGUAGE plpgsql STABLE AS $$
          DECLARE claims jsonb; r text;
          BEGIN
            IF event -> 'claims' ->> 'email' LIKE 'blocked-%' THEN
              RETURN jsonb_build_object('error', jsonb_build_object('http_code', 403, 'message', 'Blocked by the hook'));
            END IF;
            SELECT role INTO r FROM accounts_test.user_roles WHERE user_id = (event ->> 'user_id')::uuid;
            claims := jsonb_set(event -> 'claims', '{user_role}', coalesce(to_jsonb(r), 'null'));
            -- What names the user and the session is not the hook's to change.
            claims := jsonb_set(claims, '{sub}', '"someone-else"');
            RETURN jsonb_build_object('claims', claims);
          END $$;
        GRANT USAGE ON SCHEMA accounts_test TO "Authenticator";
        GRANT SELECT ON accounts_test.user_roles TO "Authenticator";
        GRANT EXECUTE ON FUNCTION accounts_test.custom_access_token_hook(jsonb) TO "Authenticator";
    "#);
    let base = start_server(rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        accounts_hook_custom_access_token: Some(
            "pg-functions://postgres/accounts_test/custom_access_token_hook".into(),
        ),
        db_schemas: Some("accounts_test".into()),
        ..default_args(&harness().superuser_uri)
    });
    let session = sign_up(&base, &address("hal", &base), "secret-hal", json!({}));
    let id = session["user"]["id"].as_str().unwrap().to_owned();
    let claims = claims_of(access(&session));
    assert_eq!((&claims["user_role"], &claims["sub"]), (&Value::Null, &json!(id)), "{claims}");
    sql(&format!("INSERT INTO accounts_test.user_roles VALUES ('{id}', 'admin')"));
    let (status, renewed) = refresh(&base, &session);
    assert_eq!(status, 200, "{renewed}");
    let claims = claims_of(access(&renewed));
    assert_eq!((&claims["user_role"], &claims["sub"]), (&json!("admin"), &json!(id)), "{claims}");
    let (status, e) = auth(
        &base,
        "/auth/v1/signup",
        json!({"email": address("blocked-ida", &base), "password": "secret-ida"}),
    );
    assert_eq!((status, e["msg"].as_str()), (403, Some("Blocked by the hook")), "{e}");
}

#[test]
fn on_sqlite_a_custom_access_token_hook_adds_claims() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("hook.db");
    let schema =
        format!("{} CREATE TABLE user_roles (user_id TEXT PRIMARY KEY, role TEXT);", crate::accounts::SCHEMA);
    let args = rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        accounts_hook_custom_access_token: Some(
            "SELECT json_object('user_role', role) FROM user_roles WHERE user_id = :user_id".into(),
        ),
        ..Default::default()
    };
    let base = crate::sqlite::serve_sqlite(&path, &schema, crate::accounts::RULES, args);
    let session = sign_up(&base, "jan@example.com", "secret-jan", json!({}));
    let id = session["user"]["id"].as_str().unwrap().to_owned();
    assert_eq!(claims_of(access(&session)).get("user_role"), None);
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute("INSERT INTO user_roles VALUES (?1, 'editor')", [&id])
        .expect("a role");
    let (status, renewed) = refresh(&base, &session);
    assert_eq!(status, 200, "{renewed}");
    let claims = claims_of(access(&renewed));
    assert_eq!((&claims["user_role"], &claims["sub"]), (&json!("editor"), &json!(id)), "{claims}");
}

/// Two throwaway P-256 keys made for these tests (`openssl genpkey -algorithm EC -pkeyopt
/// ec_paramgen_curve:P-256`, and `openssl ecparam -name prime256v1 -genkey -noout`: SEC1).
pub(crate) const NEW_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgHqQeSmrn/8rpAaMj
RwHhYwV2xqmR4+eBEmt2CLkIjcahRANCAASkNyfLR4Gl8gg/+flPYZISd3rduz5y
4WDxHWiQz2BvN5/mFnuJut3hv82ZQ6Yd08Xy1lIow/pQYgBBdr/23xSS
-----END PRIVATE KEY-----
";
const OLD_KEY: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIIYrZPudp6k0AFuJY2eAmDVtxPa+aOxHFuuIS571/jfxoAoGCCqGSM49
AwEHoUQDQgAEC4rAbx8LsmpaTwiniJ4A5a+BfI0rEzbyfH//Y/4Iku0ojWAY1APt
l+YsKjOtq8+PgCBqUUyfybBL3VJ+HZgMTQ==
-----END EC PRIVATE KEY-----
";

#[test]
fn tokens_signed_with_es256_keys_are_published_trusted_and_rotated() {
    use base64::Engine;
    let dir = tempfile::tempdir().expect("temp dir").keep();
    std::fs::write(dir.join("new.pem"), NEW_KEY).expect("a key file");
    std::fs::write(dir.join("old.pem"), OLD_KEY).expect("a key file");
    let args = rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        // The new key signs; the old one is still published and trusted.
        accounts_signing_keys: Some(format!(
            "@{},@{}",
            dir.join("new.pem").display(),
            dir.join("old.pem").display()
        )),
        ..Default::default()
    };
    let base = crate::sqlite::serve_sqlite(
        &dir.join("keys.db"),
        crate::accounts::SCHEMA,
        crate::accounts::RULES,
        args,
    );
    let r = request_to(&base, "GET", "/auth/v1/.well-known/jwks.json", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    let jwks = r.json();
    let keys = jwks["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 2, "{jwks}");
    for k in keys {
        assert_eq!(
            (&k["kty"], &k["crv"], &k["alg"], k.get("d")),
            (&json!("EC"), &json!("P-256"), &json!("ES256"), None)
        );
    }

    let session = sign_up(&base, "kit@example.com", "secret-kit", json!({}));
    let token = access(&session);
    let header: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!((&header["alg"], &header["kid"]), (&json!("ES256"), &keys[0]["kid"]), "{header}");
    let api = |token: &str| {
        request_to(&base, "GET", "/notes", &[("authorization", &format!("Bearer {token}"))]).status
    };
    assert_eq!(api(token), 200);
    // A token the old key signed (before the rotation) is still good; one of no published key is not.
    let sign = |pem: &str, kid: &Value| {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = kid.as_str().map(str::to_owned);
        let claims = json!({"role": "authenticated", "sub": session["user"]["id"], "exp": 4_102_444_800u64});
        let der = pem_to_pkcs8(pem);
        jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_ec_der(&der))
            .expect("a token")
    };
    assert_eq!(api(&sign(OLD_KEY, &keys[1]["kid"])), 200);
    assert_eq!(api(&sign(OLD_KEY, &keys[0]["kid"])), 401, "signed by one key, named as the other");
}

#[test]
fn tokens_signed_with_a_supabase_rsa_key_set_are_rs256_and_its_api_keys_are_trusted() {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let set = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/signing_keys.json");
    let base = crate::sqlite::serve_sqlite(
        &dir.join("rsa.db"),
        crate::accounts::SCHEMA,
        crate::accounts::RULES,
        rowgate::config::ServeArgs {
            accounts_enabled: Some(true),
            accounts_signing_keys: Some(format!("@{set}")),
            ..Default::default()
        },
    );
    let jwks = request_to(&base, "GET", "/auth/v1/.well-known/jwks.json", &[]).json();
    let key = &jwks["keys"][0];
    assert_eq!(
        (&key["kty"], &key["alg"], &key["kid"], key.get("d")),
        (&json!("RSA"), &json!("RS256"), &json!("rowgate-test-rsa"), None)
    );
    let session = sign_up(&base, "rue@example.com", "secret-rue", json!({}));
    let token = access(&session);
    let header = jsonwebtoken::decode_header(token).expect("a header");
    assert_eq!(
        (header.alg, header.kid.as_deref()),
        (jsonwebtoken::Algorithm::RS256, Some("rowgate-test-rsa"))
    );
    let bearer = format!("Bearer {token}");
    assert_eq!(request_to(&base, "GET", "/notes", &[("authorization", &bearer)]).status, 200);
    // An API key signed with the set's key, as the Supabase CLI makes its publishable key.
    let jwk: Value =
        serde_json::from_str::<Value>(&std::fs::read_to_string(set).unwrap()).unwrap()[0].clone();
    let private = rsa_der(&jwk);
    let key = |role: &str| {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = Some("rowgate-test-rsa".into());
        let claims = json!({"iss": "supabase-demo", "role": role, "exp": 4_102_444_800u64});
        jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_rsa_der(&private))
            .expect("a key")
    };
    assert_eq!(request_to(&base, "GET", "/notes", &[("apikey", &key("service_role"))]).status, 200);
    let (status, _) = auth_with(
        &base,
        "/auth/v1/token?grant_type=password",
        &key("anon"),
        json!({"email": "rue@example.com", "password": "secret-rue"}),
    );
    assert_eq!(status, 200);
}

/// An RSA private JWK's PKCS#1 DER.
fn rsa_der(jwk: &Value) -> Vec<u8> {
    use base64::Engine;
    use rsa::pkcs1::EncodeRsaPrivateKey;
    let int = |k: &str| {
        rsa::BigUint::from_bytes_be(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(jwk[k].as_str().unwrap()).unwrap(),
        )
    };
    let key =
        rsa::RsaPrivateKey::from_components(int("n"), int("e"), int("d"), vec![int("p"), int("q")]).unwrap();
    key.to_pkcs1_der().unwrap().as_bytes().to_vec()
}

/// A POST to the accounts with the API key `apikey`.
fn auth_with(base: &str, path: &str, apikey: &str, body: Value) -> (u16, Value) {
    let r = crate::support::send_to(
        base,
        "POST",
        path,
        &[("content-type", "application/json"), ("apikey", apikey)],
        Some(&body.to_string()),
    );
    (r.status, r.json())
}

/// A P-256 private key's PKCS#8 DER, from its PEM (PKCS#8 or SEC1).
fn pem_to_pkcs8(pem: &str) -> Vec<u8> {
    use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey};
    let key =
        p256::SecretKey::from_pkcs8_pem(pem).or_else(|_| p256::SecretKey::from_sec1_pem(pem)).expect("a key");
    key.to_pkcs8_der().expect("DER").as_bytes().to_vec()
}

#[test]
fn on_postgres_a_before_user_created_hook_may_refuse_a_sign_up() {
    postgres(); // the accounts installed
    sql(r#"
        CREATE FUNCTION accounts_test.only_example_com(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
          SELECT CASE WHEN event -> 'user' ->> 'email' LIKE '%@example.com' THEN '{}'::jsonb
                      ELSE jsonb_build_object('error', jsonb_build_object('http_code', 400, 'message', 'Only example.com may sign up'))
                 END $$;
        GRANT USAGE ON SCHEMA accounts_test TO "Authenticator";
        GRANT EXECUTE ON FUNCTION accounts_test.only_example_com(jsonb) TO "Authenticator";
    "#);
    let base = start_server(rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        accounts_hook_before_user_created: Some("accounts_test.only_example_com".into()),
        db_schemas: Some("accounts_test".into()),
        ..default_args(&harness().superuser_uri)
    });
    let (status, e) =
        auth(&base, "/auth/v1/signup", json!({"email": "lu@example.org", "password": "secret-lu"}));
    assert_eq!((status, e["msg"].as_str()), (400, Some("Only example.com may sign up")), "{e}");
    assert_eq!(
        pg_value("SELECT count(*)::text FROM auth.users WHERE email = 'lu@example.org'").as_deref(),
        Some("0")
    );
    sign_up(&base, &address("lu", &base), "secret-lu", json!({}));
}

#[test]
fn on_sqlite_a_before_user_created_hook_may_refuse_a_sign_up() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("before.db");
    let args = rowgate::config::ServeArgs {
        accounts_enabled: Some(true),
        accounts_hook_before_user_created: Some(
            "SELECT CASE WHEN :email NOT LIKE '%@example.com' THEN 'Only example.com may sign up' END".into(),
        ),
        ..Default::default()
    };
    let base = crate::sqlite::serve_sqlite(&path, crate::accounts::SCHEMA, crate::accounts::RULES, args);
    let (status, e) =
        auth(&base, "/auth/v1/signup", json!({"email": "mo@example.org", "password": "secret-mo"}));
    assert_eq!((status, e["msg"].as_str()), (403, Some("Only example.com may sign up")), "{e}");
    sign_up(&base, "mo@example.com", "secret-mo", json!({}));
}

/// Sign-ins rowgate does not offer answer as GoTrue does with them turned off, and addresses
/// GoTrue refuses are refused.
fn what_is_not_built_answers_as_a_gotrue_without_it(base: &str) {
    let post = |path: &str, body: Value| {
        let r = send_to(base, "POST", path, &[("content-type", "application/json")], Some(&body.to_string()));
        (r.status, r.json())
    };
    assert_eq!(
        post("/auth/v1/token?grant_type=web3", json!({"chain": "ethereum"})),
        (
            422,
            json!({"code": 422, "error_code": "web3_provider_disabled", "msg": "Web3 provider is disabled"})
        )
    );
    assert_eq!(
        post("/auth/v1/sso", json!({"domain": "example.com"})),
        (404, json!({"code": 404, "error_code": "saml_provider_disabled", "msg": "SAML 2.0 is disabled"}))
    );
    assert_eq!(
        post("/auth/v1/token?grant_type=id_token", json!({"provider": "google", "id_token": "a.b.c"})),
        (
            400,
            json!({"code": 400, "error_code": "provider_disabled", "msg": "Provider google is not enabled"})
        )
    );
    assert_eq!(
        post("/auth/v1/verify", json!({"type": "sms", "phone": "12345-invalid", "token": "123456"})),
        (
            400,
            json!({"code": 400, "error_code": "validation_failed", "msg": "Invalid phone number format (E.164 required)"})
        )
    );
    for email in ["xx:;x@x.x", "a@-x.io", "a@x..io", "\u{e9}@x.io"] {
        let (status, e) = post("/auth/v1/signup", json!({"email": email, "password": "secret-xx"}));
        assert_eq!(
            (status, e["msg"].as_str()),
            (400, Some("Unable to validate email address: invalid format")),
            "{email}"
        );
    }
}

/// Accounts the configuration asks for but that cannot be set up stop the start, rather than
/// leave a server whose `/auth/v1` answers 404.
#[test]
fn accounts_that_cannot_be_set_up_stop_the_start() {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let config = rowgate::config::Config::load(&rowgate::config::ServeArgs {
        db_uri: Some(format!("sqlite:{}", dir.join("bad.db").display())),
        jwt_secret: Some(JWT_SECRET.into()),
        accounts_enabled: Some(true),
        accounts_hook_custom_access_token: Some("not a hook".into()),
        ..Default::default()
    })
    .expect("a configuration");
    let refused = block_on(async { rowgate::server::start_state(std::sync::Arc::new(config)).err() });
    let e = refused.expect("the start is refused");
    assert!(e.contains("the accounts could not be set up: accounts-hook-custom-access-token"), "{e}");
}
