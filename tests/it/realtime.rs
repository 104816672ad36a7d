//! Supabase Realtime's API (`realtime-enabled`) on PostgreSQL — a cluster of its own with
//! `wal_level = logical`, set up by `rowgate realtime install` — and on SQLite: the real
//! supabase-js client (tests/js/realtime.test.mjs) on both, and frames typed by hand for the
//! protocol's edges (heartbeats, joins, unknown topics, malformed frames, slow consumers).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rowgate::cluster::TempCluster;
use rowgate::config::ServeArgs;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{block_on, send_to, start_server, JWT_SECRET};

const SCHEMA: &str = r#"
CREATE ROLE anon NOLOGIN;
CREATE ROLE authenticated NOLOGIN;
CREATE ROLE service_role NOLOGIN BYPASSRLS;
CREATE ROLE authenticator LOGIN PASSWORD 'secret' NOINHERIT;
CREATE ROLE replicator LOGIN PASSWORD 'secret';
GRANT anon, authenticated, service_role TO authenticator;
CREATE TABLE public.todos (
  id serial PRIMARY KEY, title text NOT NULL, owner text NOT NULL,
  done boolean NOT NULL DEFAULT false, tags text[], meta jsonb
);
ALTER TABLE public.todos ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_own ON public.todos FOR SELECT TO authenticated
  USING (owner = current_setting('request.jwt.claims', true)::json ->> 'sub');
GRANT SELECT ON public.todos TO authenticated;
GRANT ALL ON public.todos TO service_role;
GRANT ALL ON SEQUENCE public.todos_id_seq TO service_role;
CREATE TABLE public.notes (id serial PRIMARY KEY, body text, n int, tags text[], meta jsonb);
GRANT SELECT ON public.notes TO anon, authenticated;
GRANT ALL ON public.notes TO service_role;
GRANT ALL ON SEQUENCE public.notes_id_seq TO service_role;
CREATE TABLE public.posts (id serial PRIMARY KEY, title text NOT NULL, published boolean NOT NULL);
ALTER TABLE public.posts ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_published ON public.posts FOR SELECT TO authenticated USING (published);
GRANT SELECT ON public.posts TO authenticated;
GRANT ALL ON public.posts TO service_role;
GRANT ALL ON SEQUENCE public.posts_id_seq TO service_role;
CREATE TABLE public.seats (room int, seat text, holder text NOT NULL, PRIMARY KEY (room, seat));
ALTER TABLE public.seats ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_own_seat ON public.seats FOR SELECT TO authenticated
  USING (holder = current_setting('request.jwt.claims', true)::json ->> 'sub');
GRANT SELECT ON public.seats TO authenticated;
"#;

const SQLITE_SCHEMA: &str = r#"
CREATE TABLE todos (id integer PRIMARY KEY, title text NOT NULL, owner text NOT NULL,
                    done boolean NOT NULL DEFAULT false, tags json, meta json);
CREATE TABLE notes (id integer PRIMARY KEY, body text, n integer, tags json, meta json);
CREATE TABLE posts (id integer PRIMARY KEY, title text NOT NULL, published boolean NOT NULL);
"#;

const RULES: &str = r#"
[todos.select]
authenticated = "owner=eq.@jwt.sub"
service_role = "true"
[todos.insert]
service_role = "true"
[todos.update]
service_role = "true"
[todos.delete]
service_role = "true"
[notes.select]
anon = "true"
authenticated = "true"
service_role = "true"
[notes.insert]
service_role = "true"
[notes.delete]
service_role = "true"
[posts.select]
authenticated = "published=is.true"
service_role = "true"
[posts.insert]
service_role = "true"
"#;

/// The PostgreSQL cluster of these tests.
struct Pg {
    cluster: TempCluster,
}

fn pg() -> &'static Pg {
    static PG: OnceLock<Pg> = OnceLock::new();
    PG.get_or_init(Pg::start)
}

impl Pg {
    /// A cluster of its own with the schema, `rowgate realtime install` and the tables published.
    fn start() -> Pg {
        let cluster = TempCluster::start()
            .unwrap_or_else(|e| panic!("cannot start PostgreSQL for the realtime tests: {e}"));
        crate::support::stop_with_this_process(&cluster);
        block_on(cluster.run_sql("postgres", SCHEMA)).expect("realtime test schema");
        let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
            .args([
                "realtime",
                "install",
                "--db-uri",
                &cluster.uri("postgres", "postgres"),
                "--replication-role",
                "replicator",
            ])
            .output()
            .expect("rowgate realtime install");
        assert!(out.status.success(), "realtime install: {}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("publication supabase_realtime has 0 table(s)"), "{said}");
        block_on(cluster.run_sql(
            "postgres",
            "ALTER PUBLICATION supabase_realtime ADD TABLE public.todos, public.notes, public.posts, public.seats",
        ))
        .expect("publish");
        Pg { cluster }
    }

    fn uri(&self) -> String {
        format!("postgres://authenticator:secret@127.0.0.1:{}/postgres", self.cluster.port())
    }

    /// A realtime server's arguments on this cluster: the change feed connects as `replicator`
    /// (REPLICATION, which the authenticator does not have).
    fn args(&self) -> ServeArgs {
        ServeArgs {
            db_uri_replication: Some(format!(
                "postgres://replicator:secret@127.0.0.1:{}/postgres",
                self.cluster.port()
            )),
            ..serve_args(self.uri())
        }
    }
}

fn serve_args(db_uri: String) -> ServeArgs {
    ServeArgs {
        db_uri: Some(db_uri),
        db_schemas: Some("public".into()),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        db_pool: Some(4),
        jwt_secret: Some(JWT_SECRET.into()),
        realtime_enabled: Some(true),
        ..ServeArgs::default()
    }
}

/// A realtime server on the PostgreSQL cluster, with `extra` settings.
pub(crate) fn pg_server(extra: impl FnOnce(&mut ServeArgs)) -> String {
    let mut args = pg().args();
    extra(&mut args);
    start_server(args)
}

/// A realtime server on a fresh SQLite file, with `extra` settings.
pub(crate) fn sqlite_server(extra: impl FnOnce(&mut ServeArgs)) -> String {
    let dir = tempfile::tempdir().unwrap().keep();
    let db = dir.join("rt.db");
    rusqlite::Connection::open(&db).unwrap().execute_batch(SQLITE_SCHEMA).unwrap();
    std::fs::write(dir.join("rules.toml"), RULES).unwrap();
    let mut args = serve_args(format!("sqlite:{}", db.display()));
    args.db_rules = Some(dir.join("rules.toml"));
    args.realtime_tables = Some("todos, notes, posts".into());
    extra(&mut args);
    start_server(args)
}

fn default_pg() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| pg_server(|_| {}))
}

fn default_sqlite() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| sqlite_server(|_| {}))
}

/// Runs tests/js/realtime.test.mjs against `base` (on `backend`) with serializer `vsn`.
fn supabase_js(base: &str, backend: &str, vsn: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        dir.join("node_modules/@supabase/supabase-js").is_dir(),
        "supabase-js is not installed: run `npm ci` in tests/js (scripts/test does)"
    );
    let out = Command::new("node")
        .args(["--test", "--test-reporter=spec", "--test-concurrency=1", "realtime.test.mjs"])
        .current_dir(&dir)
        .env("ROWGATE_URL", base)
        .env("ROWGATE_JWT_SECRET", JWT_SECRET)
        .env("REALTIME_VSN", vsn)
        .env("ROWGATE_BACKEND", backend)
        .output()
        .expect("node is needed for the realtime tests");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "realtime-js tests failed:\n{report}");
}

#[test]
fn supabase_js_realtime_on_postgres() {
    supabase_js(default_pg(), "postgres", "2.0.0");
}

#[test]
fn supabase_js_realtime_on_postgres_with_serializer_1() {
    supabase_js(default_pg(), "postgres", "1.0.0");
}

#[test]
fn supabase_js_realtime_on_sqlite() {
    supabase_js(default_sqlite(), "sqlite", "2.0.0");
}

/// A signed token with `claims`.
pub(crate) fn token(claims: Value) -> String {
    use base64::Engine;
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let head = b64(br#"{"alg":"HS256","typ":"JWT"}"#);
    let body = b64(claims.to_string().as_bytes());
    let mac = hmac_sha256(JWT_SECRET.as_bytes(), format!("{head}.{body}").as_bytes());
    format!("{head}.{body}.{}", b64(&mac))
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    k[..key.len()].copy_from_slice(key);
    let (mut inner, mut outer) = (Sha256::new(), Sha256::new());
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

pub(crate) fn exp() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3600
}

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket to `base`'s /realtime/v1 with serializer `vsn`.
pub(crate) async fn connect(base: &str, vsn: &str) -> Socket {
    let key = token(json!({"role": "anon", "exp": exp()}));
    let url = format!("{}/realtime/v1/websocket?apikey={key}&vsn={vsn}", base.replace("http://", "ws://"));
    tokio_tungstenite::connect_async(url).await.expect("websocket").0
}

pub(crate) async fn send(ws: &mut Socket, frame: Value) {
    ws.send(Message::text(frame.to_string())).await.unwrap();
}

/// The next text frame, as JSON.
pub(crate) async fn next(ws: &mut Socket) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("a frame in time");
        match m.expect("open").expect("a frame") {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => continue,
        }
    }
}

#[test]
fn a_heartbeat_is_answered_on_the_phoenix_topic() {
    let base = default_sqlite();
    block_on(async {
        let mut ws = connect(base, "1.0.0").await;
        send(&mut ws, json!({"topic": "phoenix", "event": "heartbeat", "payload": {}, "ref": "7"})).await;
        assert_eq!(
            next(&mut ws).await,
            json!({"event": "phx_reply", "payload": {"response": {}, "status": "ok"}, "ref": "7", "topic": "phoenix"})
        );
        let mut ws = connect(base, "2.0.0").await;
        send(&mut ws, json!([null, "8", "phoenix", "heartbeat", {}])).await;
        assert_eq!(
            next(&mut ws).await,
            json!([null, "8", "phoenix", "phx_reply", {"response": {}, "status": "ok"}])
        );
    });
}

#[test]
fn a_join_echoes_its_bindings_with_ids_then_says_it_is_subscribed() {
    let user = token(json!({"role": "authenticated", "sub": "u1", "exp": exp()}));
    for base in [default_pg(), default_sqlite()] {
        block_on(async {
            let mut ws = connect(base, "2.0.0").await;
            let changes = json!([
                {"event": "*", "schema": "public", "table": "todos", "filter": "id=eq.1"},
                {"event": "INSERT", "schema": "public", "table": "notes"}
            ]);
            let join = json!({"config": {"postgres_changes": changes}, "access_token": user});
            send(&mut ws, json!(["1", "1", "realtime:room", "phx_join", join])).await;
            let reply = next(&mut ws).await;
            let bindings = &reply[4]["response"]["postgres_changes"];
            assert_eq!(
                reply.as_array().unwrap()[..4],
                json!(["1", "1", "realtime:room", "phx_reply"]).as_array().unwrap()[..]
            );
            assert_eq!(reply[4]["status"], "ok");
            for (i, sent) in changes.as_array().unwrap().iter().enumerate() {
                let mut echoed = bindings[i].clone();
                assert!(echoed["id"].as_u64().unwrap() < 1 << 27);
                echoed.as_object_mut().unwrap().remove("id");
                assert_eq!(&echoed, sent);
            }
            assert_ne!(bindings[0]["id"], bindings[1]["id"]);
            assert_eq!(
                next(&mut ws).await,
                json!(["1", null, "realtime:room", "system", {
                    "channel": "room", "extension": "postgres_changes",
                    "message": "Subscribed to PostgreSQL", "status": "ok"
                }])
            );
            // Presence is on unless the client says otherwise: the state follows.
            assert_eq!(next(&mut ws).await, json!(["1", null, "realtime:room", "presence_state", {}]));
        });
    }
}

#[test]
fn a_row_with_a_composite_key_goes_only_to_those_who_may_read_it() {
    // Rights are checked by reading the changed rows back by their whole key, as the
    // subscriber: key values with commas, quotes and parentheses stay one value each.
    let base = default_pg();
    let user = token(json!({"role": "authenticated", "sub": "u1", "exp": exp()}));
    block_on(async {
        let mut ws = connect(base, "2.0.0").await;
        let changes = json!([{"event": "INSERT", "schema": "public", "table": "seats"}]);
        let join = json!({"config": {"postgres_changes": changes, "presence": {"enabled": false}}, "access_token": user});
        send(&mut ws, json!(["1", "1", "realtime:seats", "phx_join", join])).await;
        assert_eq!(next(&mut ws).await[4]["status"], "ok");
        assert_eq!(next(&mut ws).await[4]["status"], "ok"); // Subscribed to PostgreSQL
        superuser_sql(
            "INSERT INTO public.seats VALUES (1, 'a,b', 'u2'), (1, 'x\"y (z)', 'u1'), (2, 'a,b', 'u1')",
        )
        .await;
        let mut got = Vec::new();
        for _ in 0..2 {
            let m = next(&mut ws).await;
            assert_eq!(m[3], "postgres_changes", "{m}");
            got.push(m[4]["data"]["record"].clone());
        }
        got.sort_by_key(|r| r["room"].as_i64());
        assert_eq!(
            got,
            [
                json!({"room": 1, "seat": "x\"y (z)", "holder": "u1"}),
                json!({"room": 2, "seat": "a,b", "holder": "u1"})
            ]
        );
    });
}

#[test]
fn a_table_published_a_moment_before_its_first_write_sends_that_write() {
    // The publication changes, then a row is written at once: the stream of the realtime
    // publication alone carries only published tables, so the change waits on no reload.
    let base = default_pg();
    let service = token(json!({"role": "service_role", "exp": exp()}));
    block_on(async {
        let mut ws = connect(base, "2.0.0").await;
        let changes = json!([{"event": "INSERT", "schema": "public"}]);
        let join = json!({"config": {"postgres_changes": changes}, "access_token": service});
        send(&mut ws, json!(["1", "1", "realtime:fresh", "phx_join", join])).await;
        assert_eq!(next(&mut ws).await[4]["status"], "ok");
        assert_eq!(next(&mut ws).await[4]["status"], "ok"); // Subscribed to PostgreSQL
        superuser_sql(
            "CREATE TABLE public.fresh (id int PRIMARY KEY, what text);
             GRANT SELECT ON public.fresh TO service_role;
             NOTIFY rowgate, 'reload schema';",
        )
        .await;
        // Once the schema cache knows the table (a subscriber is sent only what it knows).
        let client = reqwest::Client::new();
        for _ in 0..100 {
            let r = client.get(format!("{base}/fresh")).bearer_auth(&service).send().await.expect("get");
            if r.status() == 200 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        superuser_sql("ALTER PUBLICATION supabase_realtime ADD TABLE public.fresh").await;
        superuser_sql("INSERT INTO public.fresh VALUES (1, 'first')").await;
        // (Other tests write to their tables meanwhile; this channel hears those too.)
        let m = next_matching(&mut ws, |m| m[4]["data"]["table"] == "fresh").await;
        assert_eq!(m[4]["data"]["record"], json!({"id": 1, "what": "first"}), "{m}");
    });
}

/// Runs SQL as the superuser on the realtime tests' cluster.
async fn superuser_sql(sql: &str) {
    pg().cluster.run_sql("postgres", sql).await.expect("sql");
}

#[test]
fn a_binding_the_server_cannot_serve_is_reported_after_the_join() {
    let base = default_pg();
    let user = token(json!({"role": "authenticated", "sub": "u1", "exp": exp()}));
    block_on(async {
        let mut ws = connect(base, "1.0.0").await;
        let join = |changes: Value, r: &str| {
            json!({"topic": format!("realtime:bad{r}"), "event": "phx_join", "ref": r, "join_ref": r,
                   "payload": {"config": {"presence": {"enabled": false}, "postgres_changes": changes}, "access_token": user}})
        };
        let cases = [
            (json!([{"event": "*", "schema": "public", "table": "nope"}]),
             "Unable to subscribe to changes with given parameters. Please check Realtime is enabled for the given connect parameters: [event: *, schema: public, table: nope]"),
            (json!([{"event": "*", "schema": "public", "table": "todos", "filter": "nope=eq.1"}]), "invalid column for filter nope"),
            (json!([{"event": "*", "schema": "public", "table": "todos", "filter": "id=bogus.1"}]), "Error parsing `filter` params: \"id=bogus.1\""),
            (json!([{"event": "*", "schema": "public", "table": "todos", "filter": "id=in.1,2"}]), "`in` filter value must be wrapped by parentheses"),
        ];
        for (i, (changes, message)) in cases.into_iter().enumerate() {
            let r = (i + 1).to_string();
            send(&mut ws, join(changes, &r)).await;
            assert_eq!(next(&mut ws).await["payload"]["status"], "ok");
            assert_eq!(
                next(&mut ws).await,
                json!({"event": "system", "ref": null, "topic": format!("realtime:bad{r}"), "payload": {
                    "channel": format!("bad{r}"), "extension": "postgres_changes", "message": message, "status": "error"
                }})
            );
        }
    });
}

#[test]
fn unknown_topics_and_malformed_frames_get_phoenix_answers_and_the_socket_lives_on() {
    let base = default_sqlite();
    block_on(async {
        let mut ws = connect(base, "1.0.0").await;
        for bad in
            ["not json", "[1,2]", r#"{"topic":"x"}"#, r#"{"topic":1,"event":"e","payload":{},"ref":"1"}"#]
        {
            ws.send(Message::text(bad)).await.unwrap();
        }
        ws.send(Message::binary(vec![9u8, 1, 2])).await.unwrap();
        send(
            &mut ws,
            json!({"topic": "realtime:never-joined", "event": "broadcast", "payload": {}, "ref": "2"}),
        )
        .await;
        assert_eq!(
            next(&mut ws).await,
            json!({"event": "phx_reply", "payload": {"response": {"reason": "unmatched topic"}, "status": "error"},
                   "ref": "2", "topic": "realtime:never-joined"})
        );
        send(&mut ws, json!({"topic": "elsewhere", "event": "phx_join", "payload": {}, "ref": "3"})).await;
        assert_eq!(next(&mut ws).await["payload"]["response"], json!({"reason": "unmatched topic"}));
        send(&mut ws, json!({"topic": "realtime:", "event": "phx_join", "payload": {}, "ref": "4"})).await;
        assert_eq!(
            next(&mut ws).await["payload"]["response"],
            json!({"reason": "TopicNameRequired: You must provide a topic name"})
        );
        let expired = token(json!({"role": "authenticated", "sub": "x", "exp": 1000}));
        send(&mut ws, json!({"topic": "realtime:t", "event": "phx_join", "payload": {"access_token": expired}, "ref": "5"})).await;
        let reason = next(&mut ws).await["payload"]["response"]["reason"].as_str().unwrap().to_owned();
        assert!(reason.starts_with("InvalidJWTToken: Token has expired "), "{reason}");
        send(&mut ws, json!({"topic": "realtime:t", "event": "phx_join", "payload": {"access_token": "a.b.c"}, "ref": "6"})).await;
        assert_eq!(next(&mut ws).await["payload"]["status"], "error");
        // Still served.
        send(&mut ws, json!({"topic": "phoenix", "event": "heartbeat", "payload": {}, "ref": "9"})).await;
        assert_eq!(next(&mut ws).await["ref"], "9");
    });
}

#[test]
fn leaving_is_answered_then_the_channel_closes() {
    let base = default_sqlite();
    block_on(async {
        let mut ws = connect(base, "1.0.0").await;
        send(
            &mut ws,
            json!({"topic": "realtime:l", "event": "phx_join", "ref": "1", "join_ref": "1",
                              "payload": {"config": {"presence": {"enabled": false}}}}),
        )
        .await;
        assert_eq!(
            next(&mut ws).await["payload"],
            json!({"response": {"postgres_changes": []}, "status": "ok"})
        );
        send(
            &mut ws,
            json!({"topic": "realtime:l", "event": "phx_leave", "ref": "2", "join_ref": "1", "payload": {}}),
        )
        .await;
        assert_eq!(
            next(&mut ws).await,
            json!({"event": "phx_reply", "payload": {"response": {}, "status": "ok"}, "ref": "2", "topic": "realtime:l"})
        );
        assert_eq!(
            next(&mut ws).await,
            json!({"event": "phx_close", "payload": {}, "ref": "1", "topic": "realtime:l"})
        );
    });
}

#[test]
fn the_websocket_endpoint_refuses_what_is_not_a_websocket_or_not_authorized() {
    let base = default_sqlite();
    let plain = send_to(base, "GET", "/realtime/v1/websocket?vsn=1.0.0", &[], None);
    assert_eq!(plain.status, 400, "{}", plain.body);
    let bad_key = send_to(base, "GET", "/realtime/v1/websocket?apikey=nope.nope.nope&vsn=1.0.0", &[], None);
    assert_eq!(bad_key.status, 401, "{}", bad_key.body);
    assert_eq!(bad_key.json()["message"], "Unauthorized");
    let bad = send_to(
        base,
        "POST",
        "/realtime/v1/api/broadcast",
        &[("content-type", "application/json")],
        Some("{}"),
    );
    assert_eq!((bad.status, bad.json()), (422, json!({"errors": {"messages": ["can't be blank"]}})));
}

/// A client that stops reading falls behind: past `realtime-max-queue` it is dropped, and
/// the others are still served.
#[test]
fn a_slow_consumer_is_dropped_and_the_others_are_served() {
    let base = sqlite_server(|a| a.realtime_max_queue = Some(16));
    block_on(async {
        let join = json!({"topic": "realtime:busy", "event": "phx_join", "ref": "1", "join_ref": "1",
                          "payload": {"config": {"presence": {"enabled": false}}}});
        let mut slow = connect(&base, "1.0.0").await;
        let mut fast = connect(&base, "1.0.0").await;
        for ws in [&mut slow, &mut fast] {
            send(ws, join.clone()).await;
            next(ws).await;
        }
        // Broadcasts of 64 KB through HTTP: the slow client's socket buffers fill, then its
        // queue.
        let body =
            json!({"messages": [{"topic": "busy", "event": "e", "payload": {"pad": "x".repeat(65536)}}]})
                .to_string();
        // The fast client reads as it comes; the sender keeps at most 8 broadcasts ahead of it,
        // so that on a loaded machine it is not the one that falls behind.
        let received = Arc::new(AtomicUsize::new(0));
        let fast_count = received.clone();
        let fast_reader = tokio::spawn(async move {
            let mut n = 0;
            while n < 200 {
                match fast.next().await {
                    Some(Ok(Message::Text(_))) => {
                        n += 1;
                        fast_count.store(n, Ordering::SeqCst);
                    }
                    Some(Ok(_)) => {}
                    // Closed: a count short of 200 fails the test; spinning on the ended stream
                    // would starve the runtime and hang it.
                    _ => break,
                }
            }
            n
        });
        for sent in 0..200usize {
            let behind = tokio::time::Instant::now() + Duration::from_secs(10);
            while sent.saturating_sub(received.load(Ordering::SeqCst)) > 8 {
                assert!(tokio::time::Instant::now() < behind, "the fast client stopped receiving");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let r = tokio::task::spawn_blocking({
                let (base, body) = (base.clone(), body.clone());
                move || {
                    send_to(
                        &base,
                        "POST",
                        "/realtime/v1/api/broadcast",
                        &[("content-type", "application/json")],
                        Some(&body),
                    )
                }
            })
            .await
            .unwrap();
            assert_eq!(r.status, 202);
        }
        assert_eq!(tokio::time::timeout(Duration::from_secs(10), fast_reader).await.unwrap().unwrap(), 200);
        // The slow one finds, after what fit, the reason and the close.
        let mut closed = None;
        while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(10), slow.next()).await {
            match m {
                Ok(Message::Close(c)) => {
                    closed = c;
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let close = closed.expect("a close frame");
        assert_eq!(u16::from(close.code), 1013);
    });
    let metrics = send_to(&base, "GET", "/rowgate/metrics", &[], None).body;
    assert!(metrics.contains("rowgate_realtime_slow_clients_total 1"), "{metrics}");
}

/// Frames until one satisfies `want` (the others are skipped).
pub(crate) async fn next_matching(ws: &mut Socket, want: impl Fn(&Value) -> bool) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), next(ws)).await.expect("the frame in time");
        if want(&m) {
            return m;
        }
    }
}

#[test]
fn after_a_postgres_restart_subscribers_are_told_and_served_again() {
    let db = Pg::start();
    let base = start_server(db.args());
    block_on(async {
        let mut ws = connect(&base, "1.0.0").await;
        let join = json!({"topic": "realtime:notes", "event": "phx_join", "ref": "1", "join_ref": "1", "payload": {
            "config": {"presence": {"enabled": false},
                       "postgres_changes": [{"event": "INSERT", "schema": "public", "table": "notes"}]}}});
        send(&mut ws, join).await;
        next(&mut ws).await;
        assert_eq!(next(&mut ws).await["payload"]["message"], "Subscribed to PostgreSQL");
        let body = |m: &Value| m["payload"]["data"]["record"]["body"].as_str().map(str::to_owned);
        let change = |m: &Value| m["event"] == "postgres_changes";
        tokio::task::spawn_blocking({
            let uri = db.uri();
            move || block_on(run(&uri, "INSERT INTO notes (body) VALUES ('before')"))
        })
        .await
        .unwrap();
        assert_eq!(body(&next_matching(&mut ws, change).await).as_deref(), Some("before"));

        db.cluster.stop().expect("stop PostgreSQL");
        let lost = next_matching(&mut ws, |m| m["event"] == "system").await;
        assert_eq!(lost["payload"]["status"], "error");
        assert_eq!(
            lost["payload"]["message"],
            "The database's change feed stopped: changes made until it is back are not sent"
        );
        db.cluster.restart().expect("start PostgreSQL");
        let back = next_matching(&mut ws, |m| m["event"] == "system").await;
        assert_eq!(
            back["payload"],
            json!({"channel": "notes", "extension": "postgres_changes", "message": "Subscribed to PostgreSQL", "status": "ok"})
        );
        tokio::task::spawn_blocking({
            let uri = db.uri();
            move || block_on(run(&uri, "INSERT INTO notes (body) VALUES ('after')"))
        })
        .await
        .unwrap();
        assert_eq!(body(&next_matching(&mut ws, change).await).as_deref(), Some("after"));
    });
}

/// Runs `statement` as the authenticator's service role on `uri`.
async fn run(uri: &str, statement: &str) {
    let config: tokio_postgres::Config = uri.parse().unwrap();
    let client = rowgate::backend::postgres::connect_without_tls(&config).await.unwrap();
    client.batch_execute(&format!("SET ROLE service_role; {statement}")).await.unwrap();
}

/// With the response cache fed by logical decoding too, one replication slot serves both: a
/// write invalidates the cached answer and reaches the subscriber.
#[test]
fn one_replication_slot_serves_the_cache_and_realtime() {
    let db = Pg::start();
    let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["cache", "install", "--db-uri", &db.cluster.uri("postgres", "postgres")])
        .output()
        .expect("rowgate cache install");
    assert!(out.status.success(), "cache install: {}", String::from_utf8_lossy(&out.stderr));
    let mut args = db.args();
    args.cache_enabled = Some(true);
    let base = start_server(args);
    let service = token(json!({"role": "service_role", "exp": exp()}));
    let bearer = format!("Bearer {service}");
    let read = || send_to(&base, "GET", "/notes?select=body&order=id", &[("authorization", &bearer)], None);
    let started = std::time::Instant::now();
    while read().header("x-cache") != Some("hit") {
        assert!(started.elapsed() < Duration::from_secs(10), "the cache never became live");
        std::thread::sleep(Duration::from_millis(100));
    }
    let slots = || {
        let uri = db.uri();
        block_on(async move {
            let config: tokio_postgres::Config = uri.parse().unwrap();
            let client = rowgate::backend::postgres::connect_without_tls(&config).await.unwrap();
            client.query_one("SELECT count(*) FROM pg_replication_slots", &[]).await.unwrap().get::<_, i64>(0)
        })
    };
    assert_eq!(slots(), 1);
    block_on(async {
        let mut ws = connect(&base, "1.0.0").await;
        let join = json!({"topic": "realtime:one", "event": "phx_join", "ref": "1", "join_ref": "1", "payload": {
            "config": {"presence": {"enabled": false},
                       "postgres_changes": [{"event": "INSERT", "schema": "public", "table": "notes"}]}}});
        send(&mut ws, join).await;
        next(&mut ws).await;
        assert_eq!(next(&mut ws).await["payload"]["message"], "Subscribed to PostgreSQL");
        let written = tokio::task::spawn_blocking({
            let (base, bearer) = (base.clone(), bearer.clone());
            move || {
                send_to(
                    &base,
                    "POST",
                    "/notes",
                    &[("authorization", &bearer), ("content-type", "application/json")],
                    Some(r#"{"body": "both"}"#),
                )
            }
        })
        .await
        .unwrap();
        assert_eq!(written.status, 201, "{}", written.body);
        let m = next_matching(&mut ws, |m| m["event"] == "postgres_changes").await;
        assert_eq!(m["payload"]["data"]["record"]["body"], "both");
    });
    let after = read();
    assert_ne!(after.header("x-cache"), Some("hit"));
    assert!(after.body.contains("both"), "{}", after.body);
    assert_eq!(slots(), 1);
}
