//! Every service on one small pool, interleaved as an ordinary app uses them: sign-up, login and
//! sign-in through an OpenID provider, REST reads and writes under row-level security (or the
//! access rules), uploads, downloads, listings and deletions, an API key, the API's
//! description, a realtime subscriber that must see the writes, a database webhook on the
//! writes, a cron job writing beside them, an Edge Function reading as its caller, and
//! PocketBase's door signing in, writing, listing and subscribing, and a collection made there
//! whose rule holds at the REST API's door too. On PostgreSQL directly, through PgBouncer in transaction mode, and on
//! SQLite, each with a pool of one connection: whatever one request leaves on its connection
//! (a read-only mode, a role, settings) is there for the next request of any service.

use std::sync::mpsc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rowgate::config::ServeArgs;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::pgbouncer::through_pgbouncer;
use crate::support::receiver::Receiver;
use crate::support::{block_on, send_to, sql_at, start_server, JWT_SECRET};

/// The database of these tests on the test cluster: Supabase's roles, storage, accounts and
/// realtime installed, and a `todos` table each user owns rows of.
const SCHEMA: &str = r#"
CREATE TABLE public.todos (id serial PRIMARY KEY, owner text NOT NULL, title text NOT NULL);
ALTER TABLE public.todos ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON public.todos
  USING (owner = current_setting('request.jwt.claims', true)::json ->> 'sub')
  WITH CHECK (owner = current_setting('request.jwt.claims', true)::json ->> 'sub');
GRANT SELECT, INSERT, DELETE ON public.todos TO authenticated;
GRANT USAGE ON SEQUENCE public.todos_id_seq TO authenticated;
GRANT ALL ON public.todos TO service_role;
CREATE POLICY "own folder" ON storage.objects TO authenticated
  USING ((storage.foldername(name))[1] = auth.uid()::text)
  WITH CHECK ((storage.foldername(name))[1] = auth.uid()::text);
"#;

const SQLITE_SCHEMA: &str =
    "CREATE TABLE todos (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, title TEXT NOT NULL);
     CREATE TABLE ticks (id INTEGER PRIMARY KEY);";

/// The webhook on `todos` and the cron job beside the writes, on PostgreSQL.
fn hooks(receiver: &str) -> String {
    format!(
        "CREATE TRIGGER hooked AFTER INSERT ON public.todos FOR EACH ROW
           EXECUTE FUNCTION supabase_functions.http_request('{receiver}', 'POST', '{{}}', '{{}}', '2000');
         CREATE TABLE public.ticks (id serial PRIMARY KEY);
         SELECT cron.schedule('tick', '1 seconds', 'INSERT INTO public.ticks DEFAULT VALUES');"
    )
}

/// The access rules: each user's own todos, and storage's rules of `tests/it/storage.rs`.
fn rules() -> String {
    let todos = r#"
[todos]
select = { authenticated = "owner=eq.@jwt.sub", service_role = "true" }
insert = { authenticated = "owner=eq.@jwt.sub", service_role = "true" }
delete = { authenticated = "owner=eq.@jwt.sub", service_role = "true" }
"#;
    format!("{todos}{}", crate::storage::RULES)
}

/// The superuser's URI of a new database `name` on the test cluster, with Supabase's roles,
/// storage, accounts and realtime installed, and [`SCHEMA`]. Each test has its own: realtime
/// tells every reader of a table of a deleted row's key, whoever deleted it.
fn database(name: &str, receiver: &str) -> String {
    // One at a time: the installs grant cluster-wide roles, which PostgreSQL refuses to change
    // from two sessions at once ("tuple concurrently updated").
    let _one_at_a_time = crate::support::roles_lock();
    crate::storage::setup();
    let superuser = crate::support::realtime_database(name);
    let uri = superuser.clone();
    block_on(async move {
        let client = rowgate::backend::postgres::connect_without_tls(&uri.parse().unwrap()).await.unwrap();
        rowgate::backend::postgres::storage::install(&client, "Authenticator").await.expect("storage");
        rowgate::backend::postgres::accounts_install::install(&client, "Authenticator")
            .await
            .expect("accounts");
        rowgate::backend::postgres::net::install(&client, "Authenticator").await.expect("webhooks");
        rowgate::backend::postgres::cron::install(&client, "Authenticator").await.expect("cron");
    });
    sql_at(&superuser, SCHEMA);
    sql_at(&superuser, &hooks(receiver));
    sql_at(&superuser, "ALTER PUBLICATION supabase_realtime ADD TABLE public.todos");
    superuser
}

/// What every server here runs: one connection, every service; on PostgreSQL the change feed
/// connects as `Replicator`, not as the authenticator.
fn args(db_uri: String) -> ServeArgs {
    let replication = db_uri.contains("Authenticator").then(|| db_uri.replace("Authenticator", "Replicator"));
    let (project, functions) = crate::functions::project("");
    let _ = project.keep();
    let mut args = ServeArgs {
        db_uri: Some(db_uri),
        db_uri_replication: replication,
        db_schemas: Some("public".into()),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        db_pool: Some(1),
        jwt_secret: Some(JWT_SECRET.into()),
        storage_enabled: Some(true),
        storage_dir: Some(tempfile::tempdir().unwrap().keep().join("storage")),
        accounts_enabled: Some(true),
        accounts_providers: Some({
            let idp = crate::support::oidc::idp();
            format!("test issuer={} client-id={} secret={}", idp.issuer, idp.client_id, idp.secret)
        }),
        realtime_enabled: Some(true),
        ..ServeArgs::default()
    };
    args.platform.net_allow = Some("127.0.0.1/32".into());
    args.platform.functions_dir = Some(functions);
    args.platform.functions_deno = Some(crate::functions::deno());
    args.platform.pocketbase = Some(true);
    args
}

fn authenticator(superuser: &str) -> String {
    crate::support::authenticator_uri(superuser)
}

#[test]
fn every_service_in_turn_on_one_postgresql_connection() {
    let receiver = Receiver::ok();
    let superuser = database("together_direct", &receiver.url("/todos"));
    let mut args = args(authenticator(&superuser));
    // The job is postgres's, as Supabase's SQL editor schedules it; collections are made by it.
    args.platform.cron_db_uri = Some(superuser.clone());
    args.dashboard_db_uri = Some(superuser.clone());
    let base = start_server(args);
    an_app_s_day(&base, &receiver);
    ticked(|| crate::support::replica::value(&superuser, "SELECT count(*) > 0 FROM public.ticks") == "t");
}

#[test]
fn every_service_in_turn_on_one_connection_through_pgbouncer() {
    let receiver = Receiver::ok();
    let superuser = database("together_pooled", &receiver.url("/todos"));
    let direct = authenticator(&superuser);
    let mut args = ServeArgs {
        db_uri_direct: Some(direct.clone()),
        db_uri_replication: Some(direct.replace("Authenticator", "Replicator")),
        db_prepared_statements: Some(false),
        ..args(through_pgbouncer(&direct))
    };
    args.platform.cron_db_uri = Some(superuser.clone());
    args.dashboard_db_uri = Some(superuser.clone());
    let base = start_server(args);
    an_app_s_day(&base, &receiver);
    ticked(|| crate::support::replica::value(&superuser, "SELECT count(*) > 0 FROM public.ticks") == "t");
}

#[test]
fn every_service_in_turn_on_one_sqlite_connection() {
    let dir = tempfile::tempdir().unwrap().keep();
    let receiver = Receiver::ok();
    let mut args = ServeArgs { realtime_tables: Some("todos".into()), ..args(String::new()) };
    let mut webhook = crate::webhooks::sqlite_webhook("hooked", "todos", receiver.url("/todos"));
    webhook.events = vec!["INSERT".into()];
    args.platform.webhooks = Some(vec![webhook]);
    args.platform.cron = Some(vec![rowgate::config::SqliteJob {
        sql: Some("INSERT INTO ticks DEFAULT VALUES".into()),
        ..crate::cron::job("tick", "1 seconds")
    }]);
    let file = dir.join("together.db");
    let base = crate::sqlite::serve_sqlite(&file, SQLITE_SCHEMA, &rules(), args);
    an_app_s_day(&base, &receiver);
    let ticks: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("SELECT count(*) FROM ticks", [], |r| r.get(0))
        .unwrap();
    assert!(ticks > 0);
}

/// Waits (a few seconds at most) until the cron job has run beside the day's requests.
fn ticked(done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "the cron job never ran");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One request: its status and JSON body (null when empty).
fn call(base: &str, method: &str, path: &str, bearer: Option<&str>, body: Option<&str>) -> (u16, Value) {
    call_with(base, method, path, bearer, &[("content-type", "application/json")], body)
}

fn call_with(
    base: &str,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    extra: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, Value) {
    let auth = bearer.map(|t| format!("Bearer {t}"));
    let mut headers: Vec<(&str, &str)> = extra.to_vec();
    if let Some(a) = &auth {
        headers.push(("authorization", a));
    }
    let r = send_to(base, method, path, &headers, body);
    let v = serde_json::from_str(&r.body).unwrap_or_else(|_| Value::String(r.body.clone()));
    (r.status, v)
}

fn service_token() -> String {
    crate::storage::token(json!({"role": "service_role"}))
}

/// A realtime subscriber to `todos` as `token`: the changes it receives, in order. A server
/// just started may still be starting its change feed: asked again until it runs.
fn subscribe(base: &str, token: &str) -> mpsc::Receiver<Value> {
    for _ in 0..50 {
        match try_subscribe(base, token) {
            Ok(rx) => return rx,
            Err(status) if status["message"].as_str().is_some_and(|m| m.starts_with("Waiting")) => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(status) => panic!("the subscription failed: {status}"),
        }
    }
    panic!("the change feed did not start");
}

fn try_subscribe(base: &str, token: &str) -> Result<mpsc::Receiver<Value>, Value> {
    let (tx, rx) = mpsc::channel();
    let url = format!("{}/realtime/v1/websocket?apikey={token}&vsn=1.0.0", base.replace("http://", "ws://"));
    let token = token.to_owned();
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        block_on(async move {
            let (mut ws, _) = tokio_tungstenite::connect_async(url).await.expect("websocket");
            let changes = json!([{"event": "*", "schema": "public", "table": "todos"}]);
            let join = json!({"topic": "realtime:todos", "event": "phx_join", "ref": "1", "join_ref": "1",
                "payload": {"config": {"postgres_changes": changes}, "access_token": token}});
            ws.send(Message::text(join.to_string())).await.unwrap();
            let mut heartbeat = tokio::time::interval(Duration::from_secs(20));
            loop {
                tokio::select! {
                    m = ws.next() => {
                        let Some(Ok(Message::Text(t))) = m else { return };
                        let v: Value = serde_json::from_str(t.as_str()).unwrap();
                        if v["event"] == "system" && v["payload"]["extension"] == "postgres_changes" {
                            let _ = ready_tx.send(v["payload"].clone());
                        }
                        if v["event"] == "postgres_changes" && tx.send(v["payload"]["data"].clone()).is_err() {
                            return;
                        }
                    }
                    _ = heartbeat.tick() => {
                        let beat = json!({"topic": "phoenix", "event": "heartbeat", "payload": {}, "ref": "h"});
                        if ws.send(Message::text(beat.to_string())).await.is_err() { return }
                    }
                }
            }
        })
    });
    let status = ready_rx.recv_timeout(Duration::from_secs(10)).expect("subscribed in time");
    match status["status"] == "ok" {
        true => Ok(rx),
        false => Err(status),
    }
}

/// The next change a subscriber receives.
fn next_change(rx: &mpsc::Receiver<Value>) -> Value {
    rx.recv_timeout(Duration::from_secs(10)).expect("a change in time")
}

/// Signs a user up; their access token and id.
fn sign_up(base: &str, email: &str) -> (String, String) {
    let (status, session) = call(
        base,
        "POST",
        "/auth/v1/signup",
        None,
        Some(&json!({"email": email, "password": "correct horse"}).to_string()),
    );
    assert_eq!(status, 200, "{session}");
    (session["access_token"].as_str().unwrap().to_owned(), session["user"]["id"].as_str().unwrap().to_owned())
}

/// The todos a caller sees, by title.
fn titles(base: &str, token: Option<&str>) -> Vec<String> {
    let (status, rows) = call(base, "GET", "/rest/v1/todos?select=title&order=id", token, None);
    assert_eq!(status, 200, "{rows}");
    rows.as_array().unwrap().iter().map(|r| r["title"].as_str().unwrap().to_owned()).collect()
}

/// An app's day on one connection: each step follows a request of another service.
fn an_app_s_day(base: &str, receiver: &Receiver) {
    let run = format!("{}{}", std::process::id(), rand_suffix());
    let service = service_token();
    let alice_email = format!("alice-{run}@example.com");
    let (alice, alice_id) = sign_up(base, &alice_email);
    let (bob, bob_id) = sign_up(base, &format!("bob-{run}@example.com"));
    let bucket = format!("avatars-{run}");

    // A read (read-only on its connection), then a bucket created.
    assert_eq!(titles(base, Some(&alice)), Vec::<String>::new());
    let (status, body) =
        call(base, "POST", "/storage/v1/bucket", Some(&service), Some(&json!({"name": bucket}).to_string()));
    assert_eq!((status, body), (200, json!({"name": bucket})));

    // A read, then an upload.
    assert_eq!(titles(base, Some(&alice)), Vec::<String>::new());
    let path = format!("/storage/v1/object/{bucket}/{alice_id}/me.txt");
    let (status, body) = call_with(
        base,
        "POST",
        &path,
        Some(&alice),
        &[("content-type", "text/plain")],
        Some("alice's avatar"),
    );
    assert_eq!(status, 200, "{body}");

    // A subscriber, then a write it must see.
    let changes = subscribe(base, &alice);
    let (status, body) = call(
        base,
        "POST",
        "/rest/v1/todos",
        Some(&alice),
        Some(&json!({"owner": alice_id, "title": "buy milk"}).to_string()),
    );
    assert_eq!((status, body), (201, Value::String(String::new())));
    let change = next_change(&changes);
    assert_eq!((&change["type"], &change["record"]["title"]), (&json!("INSERT"), &json!("buy milk")));
    // The webhook on the write, then a function reading as its caller, then a read.
    let hooked = receiver.wait_for(Duration::from_secs(10), |r| !r.is_empty());
    assert_eq!(
        (&hooked[0].json()["type"], &hooked[0].json()["record"]["title"]),
        (&json!("INSERT"), &json!("buy milk"))
    );
    let (status, body) = call(base, "POST", "/functions/v1/titles", Some(&alice), Some("{}"));
    assert_eq!((status, body), (200, json!([{"title": "buy milk"}])));
    assert_eq!(titles(base, Some(&bob)), Vec::<String>::new());

    // The API key store answers as the server, whatever the last request ran as.
    let (status, body) = call(base, "GET", "/rest/v1/todos", None, None);
    assert_eq!((status, &body["code"]), (401, &json!("42501")));
    let (status, body) = call_with(base, "GET", "/rest/v1/todos", None, &[("apikey", "rg_not_a_key")], None);
    assert_eq!((status, &body["code"]), (403, &json!("RG011")), "{body}");

    // Another user's write, then reads: each sees their own.
    let (status, _) = call(
        base,
        "POST",
        "/rest/v1/todos",
        Some(&bob),
        Some(&json!({"owner": bob_id, "title": "bob's"}).to_string()),
    );
    assert_eq!(status, 201);
    let (status, body) = call(
        base,
        "POST",
        "/rest/v1/todos",
        Some(&bob),
        Some(&json!({"owner": alice_id, "title": "planted"}).to_string()),
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(titles(base, Some(&alice)), ["buy milk"]);
    assert_eq!(titles(base, Some(&bob)), ["bob's"]);
    let (status, body) = call(base, "GET", "/functions/v1/titles", Some(&bob), None);
    assert_eq!((status, body), (200, json!([{"title": "bob's"}])));

    // Downloads and listings after a read, each as its caller.
    let (status, body) = call(base, "GET", &path, Some(&alice), None);
    assert_eq!((status, body), (200, Value::String("alice's avatar".into())));
    assert_eq!(titles(base, Some(&bob)), ["bob's"]);
    let (status, _) = call(base, "GET", &path, Some(&bob), None);
    assert_eq!(status, 400);
    let list = json!({"prefix": alice_id}).to_string();
    let (status, body) =
        call(base, "POST", &format!("/storage/v1/object/list/{bucket}"), Some(&alice), Some(&list));
    assert_eq!((status, body.as_array().map(Vec::len)), (200, Some(1)), "{body}");
    let (status, body) =
        call(base, "POST", &format!("/storage/v1/object/list/{bucket}"), Some(&bob), Some(&list));
    assert_eq!((status, body), (200, json!([])));

    // The API's description, then a refresh and the user, then a signed URL.
    let (status, _) = call(base, "GET", "/rest/v1/", Some(&alice), None);
    assert_eq!(status, 200);
    let (status, user) = call(base, "GET", "/auth/v1/user", Some(&alice), None);
    assert_eq!((status, &user["id"]), (200, &json!(alice_id)));
    assert_eq!(titles(base, Some(&alice)), ["buy milk"]);
    // The user's own account and the admin API, between reads.
    let theme = json!({"data": {"theme": "dark"}}).to_string();
    let (status, user) = call(base, "PUT", "/auth/v1/user", Some(&alice), Some(&theme));
    assert_eq!((status, &user["user_metadata"]), (200, &json!({"theme": "dark"})), "{user}");
    assert_eq!(titles(base, Some(&bob)), ["bob's"]);
    let (status, found) = call(base, "GET", &format!("/auth/v1/admin/users/{bob_id}"), Some(&service), None);
    assert_eq!((status, &found["id"]), (200, &json!(bob_id)), "{found}");
    assert_eq!(titles(base, Some(&alice)), ["buy milk"]);
    let (status, signed) = call(
        base,
        "POST",
        &format!("/storage/v1/object/sign/{bucket}/{alice_id}/me.txt"),
        Some(&alice),
        Some(r#"{"expiresIn": 60}"#),
    );
    assert_eq!(status, 200, "{signed}");
    let (status, body) =
        call(base, "GET", &format!("/storage/v1{}", signed["signedURL"].as_str().unwrap()), None, None);
    assert_eq!((status, body), (200, Value::String("alice's avatar".into())));

    // A read, then a sign-in by a provider's ID token (a new account and its identity written),
    // then that user's write and read.
    assert_eq!(titles(base, Some(&bob)), ["bob's"]);
    let token = crate::support::oidc::id_token(&format!("carol-{run}"), "nonce");
    let grant = json!({"provider": "test", "id_token": token, "nonce": "nonce"}).to_string();
    let (status, carol) = call(base, "POST", "/auth/v1/token?grant_type=id_token", None, Some(&grant));
    assert_eq!(status, 200, "{carol}");
    let (carol, carol_id) = (carol["access_token"].as_str().unwrap(), carol["user"]["id"].as_str().unwrap());
    let todo = json!({"owner": carol_id, "title": "carol's"}).to_string();
    assert_eq!(call(base, "POST", "/rest/v1/todos", Some(carol), Some(&todo)).0, 201);
    assert_eq!(titles(base, Some(carol)), ["carol's"]);

    // A delete after a read, and the subscriber sees it.
    assert_eq!(titles(base, Some(&alice)), ["buy milk"]);
    let (status, _) = call(base, "DELETE", "/rest/v1/todos?title=eq.buy%20milk", Some(&alice), None);
    assert_eq!(status, 204);
    assert_eq!(next_change(&changes)["type"], "DELETE");
    assert_eq!(titles(base, Some(&alice)), Vec::<String>::new());
    let (status, body) = call(base, "DELETE", &path, Some(&alice), None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(base, "DELETE", &format!("/storage/v1/bucket/{bucket}"), Some(&service), None);
    assert_eq!((status, body), (200, json!({"message": "Successfully deleted"})));

    // PocketBase's door between the others' requests: alice signs in there and writes and lists
    // as herself (its token sent without `Bearer`); the subscriber sees the write, bob none of it.
    let login = json!({"identity": alice_email, "password": "correct horse"}).to_string();
    let (status, signed) =
        call(base, "POST", "/api/collections/users/auth-with-password", None, Some(&login));
    assert_eq!(status, 200, "{signed}");
    let as_alice =
        [("authorization", signed["token"].as_str().unwrap()), ("content-type", "application/json")];
    let stream = crate::pocketbase_realtime::open(base);
    assert_eq!(stream.subscribe(base, Some(as_alice[0].1), &["todos/*"]), (204, String::new()));
    let todo = json!({"owner": alice_id, "title": "from pocketbase"}).to_string();
    let (status, made) = call_with(
        base,
        "POST",
        "/api/collections/todos/records?fields=owner,title",
        None,
        &as_alice,
        Some(&todo),
    );
    assert_eq!((status, made), (200, json!({"owner": alice_id, "title": "from pocketbase"})));
    assert_eq!(next_change(&changes)["record"]["title"], "from pocketbase");
    let (topic, event) =
        stream.next(Duration::from_secs(10)).expect("PocketBase's subscriber sees the write");
    assert_eq!(
        (topic.as_str(), &event["action"], &event["record"]["title"]),
        ("todos/*", &json!("create"), &json!("from pocketbase"))
    );
    assert_eq!(titles(base, Some(&bob)), ["bob's"]);
    let mine = "/api/collections/todos/records?fields=title&filter=title~'pocket'";
    let (status, listed) = call_with(base, "GET", mine, None, &as_alice, None);
    assert_eq!((status, &listed["items"]), (200, &json!([{"title": "from pocketbase"}])), "{listed}");
    let (status, listed) = call(base, "GET", "/api/collections/todos/records?fields=title", Some(&bob), None);
    assert_eq!((status, &listed["items"]), (200, &json!([{"title": "bob's"}])), "{listed}");

    // A collection made through PocketBase's collections API between the others' requests:
    // its rule, `owner = @request.auth.id`, holds at both doors on this one connection.
    let memos = json!({
        "name": format!("memos_{run}"),
        "fields": [{"name": "owner", "type": "text"}, {"name": "text", "type": "text"}],
        "listRule": "owner = @request.auth.id", "viewRule": "owner = @request.auth.id",
        "createRule": "owner = @request.auth.id"
    });
    let as_service = [("authorization", service.as_str()), ("content-type", "application/json")];
    let (status, made) =
        call_with(base, "POST", "/api/collections", None, &as_service, Some(&memos.to_string()));
    assert_eq!(status, 200, "{made}");
    let records = format!("/api/collections/memos_{run}/records");
    let memo = json!({"owner": alice_id, "text": "alice's memo"}).to_string();
    let (status, made) =
        call_with(base, "POST", &format!("{records}?fields=text"), None, &as_alice, Some(&memo));
    assert_eq!((status, made), (200, json!({"text": "alice's memo"})));
    let rest = format!("/memos_{run}?select=text");
    assert_eq!(call(base, "GET", &rest, Some(&alice), None), (200, json!([{"text": "alice's memo"}])));
    assert_eq!(call(base, "GET", &rest, Some(&bob), None).1, json!([]));
    let (status, listed) = call(base, "GET", &format!("{records}?fields=text"), Some(&bob), None);
    assert_eq!((status, &listed["items"]), (200, &json!([])), "{listed}");
    assert_eq!(titles(base, Some(&bob)), ["bob's"]);
    let (status, _) =
        call_with(base, "DELETE", &format!("/api/collections/memos_{run}"), None, &as_service, None);
    assert_eq!(status, 204);

    // Nothing the others did reached the subscriber.
    if let Ok(change) = changes.recv_timeout(Duration::from_millis(300)) {
        panic!("alice saw a change that is not hers: {change}");
    }
}

fn rand_suffix() -> String {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).unwrap();
    rowgate::hex(&b)
}
