//! The dashboard at `/_/` as a first-time user meets it, on the real binary: the setup link the
//! banner prints, the first administrator, a session (cookie + CSRF token) that every service
//! accepts as the service role, the table editor, the console, the rules, and what a stranger
//! gets — on SQLite and on PostgreSQL after `rowgate install`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::{block_on, harness, send_to, sql, sql_at, stop_child_with_this_process, Resp};

/// A `rowgate serve` started in `dir` with `args`: its base URL and the setup link it printed.
pub fn serve_in(dir: &std::path::Path, args: &[&str]) -> (String, Option<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .arg("serve")
        .args(["--server-host", "127.0.0.1", "--server-port", "0"])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rowgate");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let (mut base, mut link) = (None, None);
    for line in lines.by_ref() {
        let line = line.expect("a banner line");
        if let Some(rest) = line.strip_prefix("rowgate: serving ") {
            base = rest.rsplit(" at ").next().map(|u| u.trim_end_matches('/').to_owned());
        }
        if line.trim_start().starts_with("dashboard") {
            link = line.split("make its administrator: ").nth(1).map(str::to_owned);
            break;
        }
    }
    // The rest of its output is drained, or the server would stop once the pipe is full.
    std::thread::spawn(move || lines.for_each(drop));
    stop_child_with_this_process(child, "true");
    let base = base.expect("the banner says where rowgate serves");
    crate::support::wait_ready(&base);
    (base, link)
}

/// An administrator's session: its cookie and CSRF token.
pub struct Admin {
    pub base: String,
    pub cookie: String,
    pub csrf: String,
}

impl Admin {
    pub fn send(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        let cookie = format!("rowgate_dashboard={}", self.cookie);
        let mut headers = vec![("cookie", cookie.as_str()), ("x-rowgate-csrf", self.csrf.as_str())];
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        send_to(&self.base, method, path, &headers, body.map(|b| b.to_string()).as_deref())
    }
}

/// The session a sign-in (or the setup) answered with.
fn session(base: &str, r: &Resp) -> Admin {
    let set = r.header("set-cookie").unwrap_or_else(|| panic!("no cookie: {r:?}"));
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"), "{set}");
    let cookie = set.split(';').next().and_then(|kv| kv.strip_prefix("rowgate_dashboard=")).expect("cookie");
    Admin {
        base: base.to_owned(),
        cookie: cookie.to_owned(),
        csrf: r.json()["csrf"].as_str().expect("csrf").to_owned(),
    }
}

fn post(base: &str, path: &str, body: Value) -> Resp {
    send_to(base, "POST", path, &[("content-type", "application/json")], Some(&body.to_string()))
}

/// The first administrator, through the link the banner printed.
pub fn set_up(base: &str, link: &str) -> Admin {
    let token = link.rsplit('/').next().expect("token");
    let r = post(
        base,
        "/_/api/setup",
        json!({"token": token, "email": "Ada@Example.com", "password": "a long enough secret"}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["email"], "ada@example.com");
    session(base, &r)
}

#[test]
fn a_first_run_on_sqlite_from_the_setup_link_to_a_readable_table() {
    let dir = tempfile::tempdir().expect("dir");
    let (base, link) = serve_in(dir.path(), &["--cache-enabled", "true"]);
    let link = link.expect("a fresh directory prints the setup link");
    assert!(link.starts_with(&format!("{base}/_/#/setup/")), "{link}");

    assert_eq!(
        send_to(&base, "GET", "/_/api/state", &[], None).json(),
        json!({"setup_needed": true, "admin": null})
    );
    let page = send_to(&base, "GET", "/_/", &[], None);
    assert_eq!(page.status, 200);
    assert!(page.header("content-security-policy").is_some_and(|p| p.starts_with("default-src 'self'")));
    assert!(page.body.contains(r#"<script type="module" src="main.js">"#), "{}", page.body);

    // A wrong link, a short password: refused, nothing made.
    let wrong = post(
        &base,
        "/_/api/setup",
        json!({"token": "guess", "email": "eve@example.com", "password": "0123456789"}),
    );
    assert_eq!((wrong.status, wrong.json()["code"].clone()), (403, json!("RG032")));
    let token = link.rsplit('/').next().unwrap();
    let short =
        post(&base, "/_/api/setup", json!({"token": token, "email": "ada@example.com", "password": "short"}));
    assert_eq!(short.status, 400);
    assert_eq!(short.json()["message"], "an administrator's password has at least 10 characters");

    let admin = set_up(&base, &link);
    // The link is used up.
    let again = post(
        &base,
        "/_/api/setup",
        json!({"token": token, "email": "eve@example.com", "password": "0123456789ab"}),
    );
    assert_eq!(
        (again.status, again.json()["message"].clone()),
        (409, json!("the dashboard is set up already: sign in"))
    );

    // The table editor: names and types are checked, then the table exists for the API at once.
    let bad = admin.send(
        "POST",
        "/_/api/tables",
        Some(json!({"name": "no such; table", "columns": [{"name": "id", "type": "integer"}]})),
    );
    assert_eq!((bad.status, bad.json()["code"].clone()), (400, json!("RG030")));
    let bad = admin.send(
        "POST",
        "/_/api/tables",
        Some(json!({"name": "notes", "columns": [{"name": "id", "type": "varchar"}]})),
    );
    assert_eq!(
        bad.json()["message"],
        "type \"varchar\": one of text, integer, real, numeric, boolean, json, timestamp, blob"
    );
    let made = admin.send(
        "POST",
        "/_/api/tables",
        Some(json!({"name": "notes", "columns": [
            {"name": "id", "type": "integer", "primary_key": true},
            {"name": "title", "type": "text", "not_null": true},
            {"name": "done", "type": "boolean", "not_null": true, "default": "0"}
        ]})),
    );
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.json()["tables"][0]["primary_key"], json!(["id"]));

    // Rows through the API, as the service role: no rule binds the dashboard.
    let added = admin.send("POST", "/rest/v1/notes", Some(json!([{"title": "milk"}, {"title": "eggs"}])));
    assert_eq!(added.status, 201, "{}", added.body);
    let visitor = send_to(&base, "GET", "/rest/v1/notes?select=title", &[], None);
    assert_eq!((visitor.status, visitor.json()["code"].clone()), (401, json!("42501")));

    // A rule for everyone, checked before it is written, in force at once.
    let broken = admin.send(
        "PUT",
        "/_/api/rules",
        Some(json!({"text": "[notes]\nselect = { everyone = \"title=nope.x\" }\n"})),
    );
    assert_eq!(broken.status, 400, "{}", broken.body);
    let saved = admin.send(
        "PUT",
        "/_/api/rules",
        Some(json!({"text": "[notes]\nselect = { everyone = \"true\" }\n"})),
    );
    assert_eq!(saved.status, 200, "{}", saved.body);
    assert_eq!(saved.json()["path"], "rowgate.rules.toml");
    assert!(dir.path().join("rowgate.rules.toml").exists());
    let read = |path: &str| send_to(&base, "GET", path, &[], None);
    assert_eq!(
        read("/rest/v1/notes?select=title&order=id").json(),
        json!([{"title": "milk"}, {"title": "eggs"}])
    );
    assert_eq!(read("/rest/v1/notes?select=title&order=id").header("x-cache"), Some("hit"));

    // The console writes as the API does: the response cache forgets what it changed.
    let console = admin.send("POST", "/_/api/sql", Some(json!({"query": "UPDATE notes SET title = upper(title); SELECT id, title FROM notes ORDER BY id"})));
    assert_eq!(
        console.json(),
        json!({"columns": ["id", "title"], "rows": [[1, "MILK"], [2, "EGGS"]], "truncated": false, "affected": 2})
    );
    assert_eq!(
        read("/rest/v1/notes?select=title&order=id").json(),
        json!([{"title": "MILK"}, {"title": "EGGS"}])
    );
    for statement in [
        "COMMIT",
        "CREATE TEMP TRIGGER t AFTER INSERT ON notes BEGIN SELECT 1; END",
        "CREATE TRIGGER temp.t AFTER INSERT ON main.notes BEGIN SELECT 1; END",
        "CREATE TABLE temp.notes (id integer primary key, title text)",
        "PRAGMA foreign_keys = off",
    ] {
        let refused = admin.send("POST", "/_/api/sql", Some(json!({"query": statement})));
        assert_eq!((refused.status, refused.json()["code"].clone()), (403, json!("42501")), "{statement}");
    }
    let typo = admin.send("POST", "/_/api/sql", Some(json!({"query": "SELEC 1"})));
    assert_eq!(
        typo.json(),
        json!({"code": "42601", "details": null, "hint": null, "message": "near \"SELEC\": syntax error"})
    );

    // A column added, then dropped.
    let added =
        admin.send("POST", "/_/api/tables/notes/columns", Some(json!({"name": "due", "type": "timestamp"})));
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(read("/rest/v1/notes?select=id,due&id=eq.1").json(), json!([{"id": 1, "due": null}]));
    assert_eq!(admin.send("DELETE", "/_/api/tables/notes/columns/due", None).status, 200);

    // Signed out, the cookie is nobody's.
    assert_eq!(admin.send("POST", "/_/api/logout", None).status, 200);
    let after = admin.send("GET", "/_/api/tables", None);
    assert_eq!((after.status, after.json()["code"].clone()), (401, json!("RG031")));
}

#[test]
fn a_stranger_gets_nothing_from_the_dashboard() {
    let dir = tempfile::tempdir().expect("dir");
    let (base, link) =
        serve_in(dir.path(), &["--accounts-enabled", "true", "--jwt-secret", crate::support::JWT_SECRET]);
    let admin = set_up(&base, &link.expect("link"));
    let cookie = format!("rowgate_dashboard={}", admin.cookie);

    // No session: 401 from the dashboard's API; the services see a visitor.
    let none = send_to(&base, "GET", "/_/api/tables", &[], None);
    assert_eq!(
        none.json(),
        json!({"code": "RG031", "details": null, "hint": null, "message": "not signed in to the dashboard, or the session expired"})
    );
    // The cookie alone — what a browser attaches to another site's request — is no credential.
    assert_eq!(send_to(&base, "GET", "/_/api/tables", &[("cookie", &cookie)], None).status, 401);
    let users = send_to(&base, "GET", "/auth/v1/admin/users", &[("cookie", &cookie)], None);
    assert_eq!(users.status, 401, "{}", users.body);
    // A forged token with the cookie: refused everywhere.
    let forged = [("cookie", cookie.as_str()), ("x-rowgate-csrf", "0000")];
    assert_eq!(send_to(&base, "GET", "/_/api/tables", &forged, None).status, 403);
    assert_eq!(send_to(&base, "GET", "/rest/v1/", &forged, None).status, 403);
    // The real pair, sent by another site's page: refused.
    let cross = [
        ("cookie", cookie.as_str()),
        ("x-rowgate-csrf", admin.csrf.as_str()),
        ("sec-fetch-site", "cross-site"),
    ];
    assert_eq!(send_to(&base, "GET", "/_/api/tables", &cross, None).status, 403);
    let origin = [
        ("cookie", cookie.as_str()),
        ("x-rowgate-csrf", admin.csrf.as_str()),
        ("origin", "https://evil.example"),
    ];
    assert_eq!(send_to(&base, "POST", "/_/api/sql", &origin, Some(r#"{"query":"select 1"}"#)).status, 403);
    // And no CORS for the dashboard: a preflight gets nothing that lets another origin in.
    let preflight = send_to(
        &base,
        "OPTIONS",
        "/_/api/sql",
        &[("origin", "https://evil.example"), ("access-control-request-method", "POST")],
        None,
    );
    assert_eq!(preflight.header("access-control-allow-origin"), None);

    // Bad bodies are the client's mistake.
    let junk = admin.send("POST", "/_/api/tables", Some(json!({"name": "t"})));
    assert_eq!((junk.status, junk.json()["code"].clone()), (400, json!("RG030")));
    assert_eq!(admin.send("GET", "/_/api/nothing", None).status, 404);

    // Guessing passwords: ten tries per address, then the door stays shut, right password or not
    // — also for a burst of tries at once, each counted before its password is checked.
    let burst: Vec<_> = (0..16)
        .map(|_| {
            let base = base.clone();
            std::thread::spawn(move || {
                post(&base, "/_/api/login", json!({"email": "ada@example.com", "password": "not the one"}))
                    .status
            })
        })
        .collect();
    let mut statuses: Vec<u16> = burst.into_iter().map(|t| t.join().expect("a try")).collect();
    statuses.sort();
    assert_eq!(statuses, [vec![401; 10], vec![429; 6]].concat());
    let right =
        post(&base, "/_/api/login", json!({"email": "ada@example.com", "password": "a long enough secret"}));
    assert_eq!((right.status, right.json()["code"].clone()), (429, json!("RG007")));

    // `rowgate admin create` adds another, who signs in (from the same file).
    let db = format!("sqlite:{}", dir.path().join("rowgate.db").display());
    let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args([
            "admin",
            "create",
            "--db-uri",
            &db,
            "--email",
            "Grace@example.com",
            "--password",
            "another long secret",
        ])
        .output()
        .expect("rowgate admin create");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args([
            "admin",
            "create",
            "--db-uri",
            &db,
            "--email",
            "grace@example.com",
            "--password",
            "another long secret",
        ])
        .output()
        .expect("rowgate admin create");
    assert_eq!(
        String::from_utf8_lossy(&again.stderr),
        "rowgate: an administrator with that address exists\n"
    );

    // With an allow-list, other addresses are refused before anything — and a session's
    // credential is refused on every service, not only below /_.
    let secret = crate::support::JWT_SECRET;
    let only =
        ["--dashboard-allowed-ips", "10.0.0.0/8", "--accounts-enabled", "true", "--jwt-secret", secret];
    let (listed, _) = serve_in(dir.path(), &only);
    let r = send_to(&listed, "GET", "/_/", &[], None);
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!("RG032")));
    let pair = [("cookie", cookie.as_str()), ("x-rowgate-csrf", admin.csrf.as_str())];
    let users = send_to(&listed, "GET", "/auth/v1/admin/users", &pair, None);
    assert_eq!((users.status, users.json()["code"].clone()), (403, json!("RG032")));
}

#[test]
fn the_dashboard_on_postgresql_after_rowgate_install() {
    let roles = crate::support::roles_lock();
    sql("DROP DATABASE IF EXISTS dashboard_path");
    sql("CREATE DATABASE dashboard_path");
    let cfg: tokio_postgres::Config = harness().superuser_uri.parse().expect("uri");
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    let user = cfg.get_user().unwrap_or("postgres").to_owned();
    let superuser = format!("postgres://{user}@127.0.0.1:{port}/dashboard_path");
    block_on(rowgate::backend::Backend::install(
        &superuser,
        rowgate::backend::Install::Supabase { role: "Authenticator".into(), replication_role: None },
    ))
    .expect("install");
    sql_at(&superuser, "ALTER ROLE \"Authenticator\" PASSWORD 'secret'");
    drop(roles);
    sql_at(
        &superuser,
        "CREATE TABLE public.todos (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, task text NOT NULL);
         ALTER TABLE public.todos ENABLE ROW LEVEL SECURITY;
         CREATE POLICY readable ON public.todos FOR SELECT TO anon USING (true);",
    );
    let db_uri = format!("postgres://Authenticator:secret@127.0.0.1:{port}/dashboard_path");
    let dir = tempfile::tempdir().expect("dir");
    let (base, link) = serve_in(
        dir.path(),
        &[
            "--db-uri",
            &db_uri,
            "--db-anon-role",
            "anon",
            "--jwt-secret",
            crate::support::JWT_SECRET,
            "--accounts-enabled",
            "true",
            "--dashboard-db-uri",
            &superuser,
        ],
    );
    let admin = set_up(&base, &link.expect("link"));

    // Rows as the service role, which row-level security does not bind.
    let added = admin.send("POST", "/rest/v1/todos", Some(json!({"task": "write the docs"})));
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(
        send_to(&base, "GET", "/rest/v1/todos?select=task", &[], None).json(),
        json!([{"task": "write the docs"}])
    );

    // The policies, per table.
    let rules = admin.send("GET", "/_/api/rules", None).json();
    assert_eq!(rules["kind"], "policies");
    assert_eq!(rules["tables"][0]["table"], "todos");
    assert_eq!(rules["tables"][0]["rls_enabled"], true);
    assert_eq!(rules["tables"][0]["policies"][0]["name"], "readable");
    assert_eq!(rules["tables"][0]["policies"][0]["roles"], json!(["anon"]));
    let file = admin.send("PUT", "/_/api/rules", Some(json!({"text": ""})));
    assert_eq!(file.status, 400);

    // A table made in the editor (on dashboard-db-uri), known to the API at once.
    let made = admin.send(
        "POST",
        "/_/api/tables",
        Some(json!({"name": "events", "columns": [
            {"name": "id", "type": "identity", "primary_key": true},
            {"name": "at", "type": "timestamptz", "not_null": true, "default": "now"},
            {"name": "what", "type": "text"}
        ]})),
    );
    assert_eq!(made.status, 201, "{}", made.body);
    let console = admin.send("POST", "/_/api/sql", Some(json!({"query": "GRANT ALL ON public.events TO service_role; SELECT count(*) AS n FROM public.events"})));
    assert_eq!(console.json(), json!({"columns": ["n"], "rows": [["0"]], "truncated": false, "affected": 0}));
    let failed = admin.send("POST", "/_/api/sql", Some(json!({"query": "SELECT * FROM nowhere"})));
    assert_eq!((failed.status, failed.json()["code"].clone()), (404, json!("42P01")));

    // Users through /auth/v1's admin API with the same session.
    let user = admin.send(
        "POST",
        "/auth/v1/admin/users",
        Some(json!({"email": "u@example.com", "password": "secret123", "email_confirm": true})),
    );
    assert_eq!(user.status, 200, "{}", user.body);
    let list = admin.send("GET", "/auth/v1/admin/users", None).json();
    assert_eq!(list["users"][0]["email"], "u@example.com");

    // Keys in `rowgate.api_keys`, administered on dashboard-db-uri; no file to back up.
    let key = admin.send("POST", "/_/api/keys", Some(json!({"role": "anon", "name": "site"})));
    assert_eq!(key.status, 201, "{}", key.body);
    assert_eq!(admin.send("GET", "/_/api/keys", None).json()["rows"][0][1], "site");
    let backup = admin.send("GET", "/_/api/backups", None);
    assert_eq!((backup.status, backup.json()["code"].clone()), (400, json!("RG501")));
}

#[test]
fn api_keys_a_backup_and_the_latest_requests_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let (base, link) = serve_in(dir.path(), &[]);
    let admin = set_up(&base, &link.expect("link"));

    let empty = admin.send("GET", "/_/api/keys", None).json();
    assert_eq!(
        empty,
        json!({"columns": ["id", "name", "role", "prefix", "created", "expires", "state"], "rows": []})
    );
    let made = admin.send(
        "POST",
        "/_/api/keys",
        Some(json!({"role": "member", "name": "ci", "expires_in_days": 30})),
    );
    assert_eq!(made.status, 201, "{}", made.body);
    let key = made.json()["key"].as_str().expect("key").to_owned();
    assert!(key.starts_with("rg_"), "{key}");
    let described = send_to(&base, "GET", "/rowgate/apikey", &[("apikey", &key)], None).json();
    assert_eq!((described["name"].clone(), described["role"].clone()), (json!("ci"), json!("member")));
    let listed = admin.send("GET", "/_/api/keys", None).json();
    assert_eq!(listed["rows"][0][1], "ci");
    assert_eq!(listed["rows"][0][6], "active");
    assert_eq!(admin.send("DELETE", "/_/api/keys/ci", None).json(), json!({"revoked": 1}));
    let refused = (0..40).find_map(|_| {
        let r = send_to(&base, "GET", "/rowgate/apikey", &[("apikey", &key)], None);
        std::thread::sleep(std::time::Duration::from_millis(100));
        (r.status == 403).then_some(r)
    });
    assert_eq!(
        refused.expect("a revoked key is refused within seconds").json()["message"],
        "API key revoked"
    );
    let nameless = admin.send("POST", "/_/api/keys", Some(json!({"role": "", "name": "x"})));
    assert_eq!((nameless.status, nameless.json()["code"].clone()), (400, json!("RG030")));

    // Realtime's engine runs for PocketBase's `/api/realtime` (on by default on SQLite): its
    // channels are listed, none yet. Services that are off say so.
    let channels = admin.send("GET", "/_/api/channels", None);
    assert_eq!((channels.status, channels.json()), (200, json!({"channels": []})));
    let sessions = admin.send("GET", "/_/api/users/x/sessions", None);
    assert_eq!((sessions.status, sessions.json()["code"].clone()), (404, json!("RG034")));

    // A backup taken now into backup-dir, listed, and downloaded whole.
    let none = admin.send("GET", "/_/api/backups", None).json();
    let dir = dir.path().join("backups").display().to_string();
    assert_eq!(none, json!({"dir": dir, "schedule": null, "keep": 7, "backups": []}));
    let taken = admin.send("POST", "/_/api/backups", None);
    assert_eq!(taken.status, 201, "{}", taken.body);
    let name = taken.json()["name"].as_str().expect("name").to_owned();
    assert_eq!(admin.send("GET", "/_/api/backups", None).json()["backups"], json!([taken.json()]));
    let file = send_to(
        &base,
        "GET",
        &format!("/_/api/backups/{name}"),
        &[("cookie", &format!("rowgate_dashboard={}", admin.cookie)), ("x-rowgate-csrf", &admin.csrf)],
        None,
    );
    assert_eq!((file.status, file.header("content-type")), (200, Some("application/gzip")));
    assert_eq!(file.header("content-length"), Some(taken.json()["bytes"].to_string().as_str()));
    let outside = admin.send("GET", "/_/api/backups/..%2Frowgate.db", None);
    assert_eq!((outside.status, outside.json()["code"].clone()), (404, json!("RG034")));

    // The latest requests: kept once the page asks, newest first, secrets masked.
    assert_eq!(admin.send("GET", "/_/api/requests", None).status, 200);
    send_to(&base, "GET", "/rest/v1/nothing?apikey=secret", &[], None);
    let seen = admin.send("GET", "/_/api/requests", None).json();
    let latest =
        seen["requests"].as_array().expect("requests").iter().find(|r| {
            r["method"] == "GET" && r["uri"].as_str().unwrap_or("").starts_with("/rest/v1/nothing")
        });
    let latest = latest.unwrap_or_else(|| panic!("{seen}"));
    // (`apikey=secret` is no filter: PGRST100.)
    assert_eq!(latest["status"], 400);
    assert!(!latest["uri"].as_str().unwrap().contains("secret"), "{latest}");
    assert_eq!(latest["caller"], "anon", "{latest}");
}
