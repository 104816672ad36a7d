//! The SQLite backend (`db-uri = sqlite:PATH`): PostgREST's read grammar on an SQLite file,
//! rendered as PostgREST renders the PostgreSQL equivalents, and the access rules file.

use std::sync::OnceLock;

use serde_json::json;

use crate::support::{request_to, send_to, start_server, JWT_SECRET};

const SCHEMA: &str = r#"
CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, active BOOLEAN, meta JSON);
CREATE TABLE posts (id INTEGER PRIMARY KEY, author_id INTEGER REFERENCES authors (id), title TEXT, score REAL);
CREATE TABLE tags (id INTEGER PRIMARY KEY, label TEXT UNIQUE);
CREATE TABLE post_tags (post_id INTEGER REFERENCES posts (id), tag_id INTEGER REFERENCES tags (id),
                        PRIMARY KEY (post_id, tag_id));
CREATE TABLE secrets (id INTEGER PRIMARY KEY, author_id INTEGER REFERENCES authors (id), body TEXT);
CREATE VIEW active_authors AS SELECT id, name FROM authors WHERE active;
CREATE TABLE notes (id INTEGER PRIMARY KEY, author_id INTEGER REFERENCES authors (id), owner TEXT,
                    public BOOLEAN NOT NULL, body TEXT);
CREATE TABLE readings (id INTEGER PRIMARY KEY, v REAL);
INSERT INTO readings VALUES (1, 3.0), (2, 2.5), (3, NULL);
INSERT INTO authors VALUES (1, 'ann', 1, '{"a": {"b": 2}, "s": "x"}'), (2, 'bob', 0, NULL), (3, 'Cy', NULL, '[1, 2]');
INSERT INTO posts VALUES (1, 1, 'Hello', 1.5), (2, 1, 'World', NULL), (3, 2, 'Bye_now', 3.25);
INSERT INTO tags VALUES (1, 'news'), (2, 'misc');
INSERT INTO post_tags VALUES (1, 1), (1, 2), (3, 2);
INSERT INTO secrets VALUES (1, 1, 'psst');
INSERT INTO notes VALUES (1, 1, 'alice', 1, 'alice public'), (2, 1, 'alice', 0, 'alice private'),
                         (3, 2, 'bob', 0, 'bob private');
"#;

const RULES: &str = r#"
[authors]
select = { anon = "true", authenticated = "true" }
[posts]
select = { anon = "true", authenticated = "true" }
[tags]
select = { anon = "true" }
[post_tags]
select = { anon = "true" }
[active_authors]
select = { anon = "true" }
[readings]
select = { anon = "true" }
[secrets]
select = { editor = "true" }
[notes]
select = { anon = "public=is.true", authenticated = "owner=eq.@jwt.sub", editor = "or=(public.is.true,owner.eq.bob)" }
"#;

/// Creates the SQLite file `path` with `schema`, writes `rules` beside it, and starts a server
/// on it (anonymous role `anon`, the tests' JWT secret) with `args` for the rest.
pub fn serve_sqlite(
    path: &std::path::Path,
    schema: &str,
    rules: &str,
    args: rowgate::config::ServeArgs,
) -> String {
    rusqlite::Connection::open(path).expect("create").execute_batch(schema).expect("schema");
    let rules_file = path.with_extension("rules.toml");
    std::fs::write(&rules_file, rules).expect("rules");
    start_server(rowgate::config::ServeArgs {
        db_uri: Some(format!("sqlite:{}", path.display())),
        db_anon_role: Some("anon".into()),
        db_rules: Some(rules_file),
        server_host: Some("127.0.0.1".into()),
        jwt_secret: Some(JWT_SECRET.into()),
        ..args
    })
}

/// A server on a fresh SQLite file with [`SCHEMA`] and [`RULES`].
fn base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("test.db");
        serve_sqlite(&path, SCHEMA, RULES, Default::default())
    })
}

#[track_caller]
fn check(path: &str, status: u16, body: serde_json::Value) {
    let r = request_to(base(), "GET", path, &[]);
    assert_eq!(r.status, status, "GET {path}: {}", r.body);
    assert_eq!(r.json(), body, "GET {path}");
}

fn token(role: &str) -> String {
    signed(json!({ "role": role }))
}

fn signed(claims: serde_json::Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap()
}

#[test]
fn rows_render_as_postgrest_renders_them() {
    check(
        "/authors",
        200,
        json!([
            {"id": 1, "name": "ann", "active": true, "meta": {"a": {"b": 2}, "s": "x"}},
            {"id": 2, "name": "bob", "active": false, "meta": null},
            {"id": 3, "name": "Cy", "active": null, "meta": [1, 2]}
        ]),
    );
    check("/authors?select=who:name&id=eq.2", 200, json!([{"who": "bob"}]));
    check("/active_authors", 200, json!([{"id": 1, "name": "ann"}]));
    check("/posts?select=id,score&id=eq.1", 200, json!([{"id": 1, "score": 1.5}]));
    // A REAL with no fraction as PostgreSQL's float8 renders it: 3, not 3.0.
    let r = request_to(base(), "GET", "/readings?order=id", &[]);
    assert_eq!(r.body, r#"[{"id":1,"v":3},{"id":2,"v":2.5},{"id":3,"v":null}]"#);
}

#[test]
fn filters() {
    let ids = |path: &str, expected: &[i64]| {
        let r = request_to(base(), "GET", path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let got: Vec<i64> = r.json().as_array().unwrap().iter().map(|o| o["id"].as_i64().unwrap()).collect();
        assert_eq!(got, expected, "{path}");
    };
    ids("/authors?select=id&id=gt.1", &[2, 3]);
    ids("/authors?select=id&id=neq.2", &[1, 3]);
    ids("/authors?select=id&id=in.(1,3)", &[1, 3]);
    ids("/authors?select=id&id=not.in.(1,3)", &[2]);
    ids("/authors?select=id&active=is.null", &[3]);
    ids("/authors?select=id&active=is.true", &[1]);
    ids("/authors?select=id&active=eq.false", &[2]);
    // like is case-sensitive, ilike is not; `*` is the wildcard, `_` one character.
    ids("/authors?select=id&name=like.c*", &[]);
    ids("/authors?select=id&name=ilike.c*", &[3]);
    ids("/posts?select=id&title=like.Bye_now", &[3]);
    ids("/posts?select=id&title=like.*o*", &[1, 2, 3]);
    ids("/authors?select=id&or=(id.eq.1,name.eq.Cy)", &[1, 3]);
    ids("/authors?select=id&and=(id.gte.1,or(active.is.false,active.is.null))", &[2, 3]);
    ids("/authors?select=id&meta->s=eq.x".replace("->", "-%3E").as_str(), &[]);
    ids("/authors?select=id&meta->>s=eq.x".replace("->", "-%3E").as_str(), &[1]);
    ids("/authors?select=id&meta->a->>b=eq.2".replace("->", "-%3E").as_str(), &[1]);
}

#[test]
fn json_paths_read_like_postgresql() {
    check(
        &"/authors?select=id,b:meta->a->b,t:meta->a->>b,s:meta->>s&id=eq.1".replace("->", "-%3E"),
        200,
        json!([{"id": 1, "b": 2, "t": "2", "s": "x"}]),
    );
}

#[test]
fn order_limit_offset_range_and_count() {
    // NULLs last ascending and first descending, as in PostgreSQL.
    check("/authors?select=id&order=active.asc", 200, json!([{"id": 2}, {"id": 1}, {"id": 3}]));
    check("/authors?select=id&order=active.desc", 200, json!([{"id": 3}, {"id": 1}, {"id": 2}]));
    check("/authors?select=id&order=active.desc.nullslast", 200, json!([{"id": 1}, {"id": 2}, {"id": 3}]));
    check("/authors?select=id&order=id&limit=1&offset=1", 200, json!([{"id": 2}]));
    check("/authors?select=id&order=id&offset=2", 200, json!([{"id": 3}]));
    let r = request_to(
        base(),
        "GET",
        "/authors?select=id&order=id",
        &[("range", "0-1"), ("prefer", "count=exact")],
    );
    assert_eq!((r.status, r.header("content-range")), (206, Some("0-1/3")), "{}", r.body);
    assert_eq!(r.json(), json!([{"id": 1}, {"id": 2}]));
    let r = request_to(base(), "GET", "/authors?select=id", &[]);
    assert_eq!(r.header("content-range"), Some("0-2/*"));
    let r = request_to(base(), "GET", "/authors?select=id&offset=5", &[("prefer", "count=exact")]);
    assert_eq!((r.status, r.header("content-range")), (416, Some("*/3")), "{}", r.body);
}

#[test]
fn embedding_through_foreign_keys() {
    check(
        "/posts?select=title,authors(name)&order=id",
        200,
        json!([
            {"title": "Hello", "authors": {"name": "ann"}},
            {"title": "World", "authors": {"name": "ann"}},
            {"title": "Bye_now", "authors": {"name": "bob"}}
        ]),
    );
    check(
        "/authors?select=name,posts(title)&id=lt.4&posts.order=id.desc&order=id",
        200,
        json!([
            {"name": "ann", "posts": [{"title": "World"}, {"title": "Hello"}]},
            {"name": "bob", "posts": [{"title": "Bye_now"}]},
            {"name": "Cy", "posts": []}
        ]),
    );
    check(
        "/posts?select=id,tags(label)&order=id&tags.order=label",
        200,
        json!([
            {"id": 1, "tags": [{"label": "misc"}, {"label": "news"}]},
            {"id": 2, "tags": []},
            {"id": 3, "tags": [{"label": "misc"}]}
        ]),
    );
    check(
        "/posts?select=id,authors!inner(name)&authors.name=eq.bob",
        200,
        json!([{"id": 3, "authors": {"name": "bob"}}]),
    );
}

#[test]
fn csv_as_postgrest_writes_it() {
    let r = request_to(
        base(),
        "GET",
        "/authors?select=id,name,active&id=lt.3&order=id",
        &[("accept", "text/csv")],
    );
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/csv; charset=utf-8")), "{}", r.body);
    assert_eq!(r.body, "id,name,active\n1,ann,t\n2,bob,f");
    let r = request_to(base(), "GET", "/posts?select=id,title&id=eq.3", &[("accept", "text/csv")]);
    assert_eq!(r.body, "id,title\n3,Bye_now");
}

#[test]
fn a_singular_object_is_one_row_or_406() {
    let object = [("accept", "application/vnd.pgrst.object+json")];
    let r = request_to(base(), "GET", "/authors?select=name&id=eq.1", &object);
    assert_eq!((r.status, r.json()), (200, json!({"name": "ann"})), "{}", r.body);
    let r = request_to(base(), "GET", "/authors?select=name", &object);
    assert_eq!((r.status, r.json()["code"].as_str()), (406, Some("PGRST116")), "{}", r.body);
}

#[test]
fn what_sqlite_cannot_express_is_refused_naming_it() {
    let r = request_to(base(), "GET", "/authors?name=cs.{a}", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("RG501")), "{}", r.body);
    let r = request_to(base(), "GET", "/authors?name=fts.ann", &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    check(
        "/xyzzy",
        404,
        json!({"code": "PGRST205", "details": null, "hint": null,
               "message": "Could not find the table 'public.xyzzy' in the schema cache"}),
    );
}

#[test]
fn the_rules_decide_who_reads_and_writes_what() {
    // No rule for the anonymous caller: PostgreSQL's permission denied, 401.
    let r = request_to(base(), "GET", "/secrets", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (401, Some("42501")), "{}", r.body);
    // Nor through an embed.
    let r = request_to(base(), "GET", "/authors?select=name,secrets(body)", &[]);
    assert_eq!(r.status, 401, "{}", r.body);
    // The role the rule names.
    let editor = format!("Bearer {}", token("editor"));
    let r = request_to(base(), "GET", "/secrets?select=body", &[("authorization", &editor)]);
    assert_eq!((r.status, r.json()), (200, json!([{"body": "psst"}])), "{}", r.body);
    // Another role: 403; `authenticated` rules cover it, `anon` rules do not.
    let other = format!("Bearer {}", token("reader"));
    assert_eq!(request_to(base(), "GET", "/secrets", &[("authorization", &other)]).status, 403);
    assert_eq!(
        request_to(base(), "GET", "/posts?select=id&id=eq.1", &[("authorization", &other)]).status,
        200
    );
    assert_eq!(request_to(base(), "GET", "/tags", &[("authorization", &other)]).status, 403);
    // No insert rule: no insert.
    let w =
        send_to(base(), "POST", "/authors", &[("content-type", "application/json")], Some(r#"{"name":"x"}"#));
    assert_eq!((w.status, w.json()["code"].as_str()), (401, Some("42501")), "{}", w.body);
}

#[test]
fn a_missing_database_file_is_created_and_nothing_is_readable_without_rules() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("new.db");
    let base = start_server(rowgate::config::ServeArgs {
        db_uri: Some(format!("sqlite:{}", path.display())),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        ..Default::default()
    });
    assert!(path.exists());
    let r = request_to(&base, "GET", "/anything", &[]);
    assert_eq!(r.status, 404, "{}", r.body);
}

#[test]
fn a_rule_s_row_filter_decides_which_rows_a_caller_reads() {
    let bodies = |path: &str, auth: Option<String>| {
        let bearer = auth.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer.iter().map(|b| ("authorization", b.as_str())).collect();
        let r = request_to(base(), "GET", path, &headers);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
    };
    // Anonymous: the public rows only, also when asked for more.
    assert_eq!(bodies("/notes?select=body", None), json!([{"body": "alice public"}]));
    assert_eq!(bodies("/notes?select=body&public=is.false", None), json!([]));
    // Authenticated: its own rows, by the token's `sub`.
    let alice = signed(json!({"role": "reader", "sub": "alice"}));
    assert_eq!(
        bodies("/notes?select=body&order=id", Some(alice.clone())),
        json!([{"body": "alice public"}, {"body": "alice private"}])
    );
    // A token without the claim the rule names reads nothing.
    assert_eq!(bodies("/notes?select=body", Some(token("reader"))), json!([]));
    // Several entries apply: a row any of them allows (editor: `or=(...)`, authenticated: sub).
    let editor_alice = signed(json!({"role": "editor", "sub": "alice"}));
    assert_eq!(
        bodies("/notes?select=id&order=id", Some(editor_alice)),
        json!([{"id": 1}, {"id": 2}, {"id": 3}])
    );
    // The rule holds in embeds, in `!inner` existence and in counts.
    assert_eq!(
        bodies("/authors?select=name,notes(body)&id=lt.3&order=id", None),
        json!([{"name": "ann", "notes": [{"body": "alice public"}]}, {"name": "bob", "notes": []}])
    );
    assert_eq!(bodies("/authors?select=name,notes!inner(id)&id=eq.2", None), json!([]));
    let r = request_to(base(), "GET", "/notes?select=id", &[("prefer", "count=exact")]);
    assert_eq!(r.header("content-range"), Some("0-0/1"), "{}", r.body);
}

#[test]
fn the_rules_hold_in_spreads_and_nothing_fails_by_the_rows_they_hide() {
    // A spread reads its table under that table's rule: none for `secrets`, so the anonymous
    // caller is refused; `notes` shows the public rows only.
    let r = request_to(base(), "GET", "/authors?select=name,...secrets(body)", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (401, Some("42501")), "{}", r.body);
    check("/notes?select=id,...authors(name)&order=id", 200, json!([{"id": 1, "name": "ann"}]));
    check("/authors?select=id,...notes(body)&id=eq.1", 200, json!([{"id": 1, "body": ["alice public"]}]));
    let r = request_to(base(), "GET", "/posts?select=title,...authors(...secrets(body))", &[]);
    assert_eq!(r.status, 401, "{}", r.body);
    // A JSON path on text that is not JSON reads as null rather than failing, so whether a
    // hidden row exists (note 2 is private) cannot be told from an error.
    check("/notes?id=eq.2&body->>x=is.null&select=id", 200, json!([]));
    check("/notes?id=eq.1&body->>x=is.null&select=id", 200, json!([{"id": 1}]));
    check("/notes?id=eq.2&body::json->a=is.null&select=id", 200, json!([]));
    // A bad pattern fails whatever the rows.
    for path in ["/notes?id=eq.2&body=match.(", "/notes?id=eq.99&body=match.("] {
        let r = request_to(base(), "GET", path, &[]);
        assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("2201B")), "{path}: {}", r.body);
    }
}

const WRITE_SCHEMA: &str = r#"
CREATE TABLE lists (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE items (id INTEGER PRIMARY KEY, list_id INTEGER NOT NULL REFERENCES lists (id),
                    title TEXT NOT NULL, done BOOLEAN NOT NULL DEFAULT 0, owner TEXT, extra JSON);
INSERT INTO lists VALUES (1, 'home');
CREATE TABLE tasks (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, title TEXT NOT NULL);
INSERT INTO tasks VALUES (1, 'alice', 'a1'), (2, 'bob', 'b1');
CREATE TABLE handles (id INTEGER PRIMARY KEY, handle TEXT UNIQUE ON CONFLICT REPLACE);
INSERT INTO handles VALUES (1, 'taken');
"#;

const WRITE_RULES: &str = r#"
[lists]
select = { anon = "true", authenticated = "true" }
insert = { anon = "true" }
[items]
select = { anon = "true", authenticated = "owner=eq.@jwt.sub" }
insert = { anon = "title=neq.forbidden", authenticated = "owner=eq.@jwt.sub" }
update = { anon = "done=is.false" }
delete = { authenticated = "owner=eq.@jwt.sub" }
[later]
select = { anon = "true" }
[tasks]
select = { authenticated = "owner=eq.@jwt.sub" }
insert = { authenticated = "true" }
update = { authenticated = "true" }
delete = { authenticated = "true" }
[handles]
select = { anon = "true" }
insert = { anon = "true" }
"#;

/// The write tests' SQLite file.
fn write_db() -> &'static std::path::Path {
    static PATH: OnceLock<std::path::PathBuf> = OnceLock::new();
    PATH.get_or_init(|| tempfile::tempdir().expect("temp dir").keep().join("writes.db"))
}

/// A server on its own SQLite file for the write tests.
fn write_base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| serve_sqlite(write_db(), WRITE_SCHEMA, WRITE_RULES, Default::default()))
}

fn post(path: &str, headers: &[(&str, &str)], body: &str) -> crate::support::Resp {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    send_to(write_base(), "POST", path, &all, Some(body))
}

#[test]
fn inserts_answer_as_postgrest_does() {
    let r = post("/items", &[], r#"{"id": 1, "list_id": 1, "title": "milk"}"#);
    assert_eq!((r.status, r.header("content-range")), (201, Some("*/*")), "{}", r.body);
    assert_eq!(r.body, "");
    let r = post(
        "/items?select=id,title,done,extra,lists(name)",
        &[("prefer", "return=representation")],
        r#"[{"id": 2, "list_id": 1, "title": "eggs", "done": true, "extra": {"n": [1]}},
            {"id": 3, "list_id": 1, "title": "tea", "done": false, "extra": null}]"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.json(),
        json!([
            {"id": 2, "title": "eggs", "done": true, "extra": {"n": [1]}, "lists": {"name": "home"}},
            {"id": 3, "title": "tea", "done": false, "extra": null, "lists": {"name": "home"}}
        ])
    );
    // A missing key takes the column's default with `missing=default`.
    let r = post(
        "/items?columns=id,list_id,title,done",
        &[
            ("prefer", "return=representation,missing=default"),
            ("accept", "application/vnd.pgrst.object+json"),
        ],
        r#"{"id": 4, "list_id": 1, "title": "jam"}"#,
    );
    assert_eq!((r.status, r.json()["done"].clone()), (201, json!(false)), "{}", r.body);
    let r = post("/lists", &[("prefer", "return=headers-only")], r#"{"id": 7, "name": "work"}"#);
    assert_eq!((r.status, r.header("location")), (201, Some("/lists?id=eq.7")), "{}", r.body);
    // A merging upsert may update: without an update rule, permission denied.
    let r = post("/lists", &[("prefer", "resolution=merge-duplicates")], r#"{"id": 7, "name": "work"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (401, Some("42501")), "{}", r.body);
}

#[test]
fn constraint_violations_are_postgresql_s_errors() {
    let r = post("/lists", &[], r#"{"id": 1, "name": "again"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (409, Some("23505")), "{}", r.body);
    let r = post("/items", &[], r#"{"id": 50, "list_id": 99, "title": "x"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (409, Some("23503")), "{}", r.body);
    let r = post("/items", &[], r#"{"id": 51, "list_id": 1}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("23502")), "{}", r.body);
    // Nothing of a failed bulk insert stays.
    let r = post(
        "/items",
        &[],
        r#"[{"id": 52, "list_id": 1, "title": "a"}, {"id": 52, "list_id": 1, "title": "b"}]"#,
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let r = request_to(write_base(), "GET", "/items?id=eq.52", &[]);
    assert_eq!(r.json(), json!([]));
}

#[test]
fn updates_and_deletes_follow_the_rules() {
    post(
        "/items",
        &[],
        r#"[{"id": 20, "list_id": 1, "title": "u1", "done": false}, {"id": 21, "list_id": 1, "title": "u2", "done": true}]"#,
    );
    // The update rule (done=is.false) leaves row 21 alone.
    let r = send_to(
        write_base(),
        "PATCH",
        "/items?id=in.(20,21)&select=id,title",
        &[("content-type", "application/json"), ("prefer", "return=representation")],
        Some(r#"{"title": "changed"}"#),
    );
    assert_eq!((r.status, r.json()), (200, json!([{"id": 20, "title": "changed"}])), "{}", r.body);
    assert_eq!(r.header("content-range"), Some("0-0/*"));
    // An update may not move a row out of its rule (WITH CHECK).
    let r = send_to(
        write_base(),
        "PATCH",
        "/items?id=eq.20",
        &[("content-type", "application/json")],
        Some(r#"{"done": true}"#),
    );
    assert_eq!((r.status, r.json()["code"].as_str()), (403, Some("42501")), "{}", r.body);
    // An insert the rule does not allow.
    let r = post("/items", &[], r#"{"id": 22, "list_id": 1, "title": "forbidden"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (403, Some("42501")), "{}", r.body);
    // No delete rule for the anonymous caller.
    let r = send_to(write_base(), "DELETE", "/items?id=eq.20", &[], None);
    assert_eq!((r.status, r.json()["code"].as_str()), (401, Some("42501")), "{}", r.body);
    // An authenticated caller writes and deletes its own rows only.
    let alice = format!("Bearer {}", signed(json!({"role": "member", "sub": "alice"})));
    let r = post(
        "/items",
        &[("authorization", &alice)],
        r#"{"id": 30, "list_id": 1, "title": "a", "owner": "alice"}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = post(
        "/items",
        &[("authorization", &alice)],
        r#"{"id": 31, "list_id": 1, "title": "b", "owner": "bob"}"#,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = send_to(
        write_base(),
        "DELETE",
        "/items?id=in.(20,30)",
        &[("authorization", &alice), ("prefer", "return=representation")],
        None,
    );
    assert_eq!((r.status, r.json().as_array().map(|a| a.len())), (200, Some(1)), "{}", r.body);
    assert_eq!(r.json()[0]["id"], 30);
    assert_eq!(request_to(write_base(), "GET", "/items?id=eq.20&select=id", &[]).json(), json!([{"id": 20}]));
}

#[test]
fn filtered_writes_match_only_rows_the_caller_may_read() {
    // As PostgreSQL applies SELECT policies to an UPDATE or DELETE with a WHERE clause: alice
    // may update and delete any task, but her filters only find the tasks she may read, and
    // neither a count nor a Location tells her of the others.
    let alice = format!("Bearer {}", signed(json!({"role": "member", "sub": "alice"})));
    let r = send_to(
        write_base(),
        "PATCH",
        "/tasks?owner=eq.bob",
        &[("authorization", &alice), ("content-type", "application/json"), ("prefer", "count=exact")],
        Some(r#"{"title": "mine now"}"#),
    );
    assert_eq!((r.status, r.header("content-range")), (204, Some("*/0")), "{}", r.body);
    let r = send_to(
        write_base(),
        "DELETE",
        "/tasks?title=like.b*",
        &[("authorization", &alice), ("prefer", "count=exact")],
        None,
    );
    assert_eq!((r.status, r.header("content-range")), (204, Some("*/0")), "{}", r.body);
    let bob = format!("Bearer {}", signed(json!({"role": "member", "sub": "bob"})));
    let r = request_to(write_base(), "GET", "/tasks?select=title", &[("authorization", &bob)]);
    assert_eq!(r.json(), json!([{"title": "b1"}]), "{}", r.body);
    let r = post(
        "/tasks",
        &[("authorization", &alice), ("prefer", "return=headers-only")],
        r#"{"id": 3, "owner": "bob", "title": "b2"}"#,
    );
    assert_eq!((r.status, r.header("location")), (201, None), "{}", r.body);
    let r = post(
        "/tasks",
        &[("authorization", &alice), ("prefer", "return=headers-only")],
        r#"{"id": 4, "owner": "alice", "title": "a2"}"#,
    );
    assert_eq!((r.status, r.header("location")), (201, Some("/tasks?id=eq.4")), "{}", r.body);
}

#[test]
fn a_merging_upsert_never_updates_or_writes_a_row_the_caller_may_not_read() {
    // As PostgreSQL checks the row an ON CONFLICT DO UPDATE finds, and the rows it writes,
    // against SELECT policies: alice may update any task but read only hers.
    let alice = format!("Bearer {}", signed(json!({"role": "member", "sub": "alice"})));
    let merge =
        [("authorization", alice.as_str()), ("prefer", "resolution=merge-duplicates,return=representation")];
    let r = post("/tasks", &merge, r#"{"id": 2, "owner": "alice", "title": "taken over"}"#);
    assert_eq!(r.json(), json!([]), "{}", r.body);
    let r = post("/tasks", &merge, r#"{"id": 5, "owner": "bob", "title": "planted"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (403, Some("42501")), "{}", r.body);
    let r = post("/tasks", &merge, r#"{"id": 6, "owner": "alice", "title": "a3"}"#);
    assert_eq!(
        (r.status, r.json()),
        (201, json!([{"id": 6, "owner": "alice", "title": "a3"}])),
        "{}",
        r.body
    );
    let bob = format!("Bearer {}", signed(json!({"role": "member", "sub": "bob"})));
    let r = request_to(write_base(), "GET", "/tasks?id=in.(2,5)&select=title", &[("authorization", &bob)]);
    assert_eq!(r.json(), json!([{"title": "b1"}]), "{}", r.body);
}

#[test]
fn a_conflict_declared_replace_fails_instead_of_deleting_the_other_row() {
    // There is no delete rule for `handles`: an insert must not remove a row either.
    let r = post("/handles", &[], r#"{"id": 2, "handle": "taken"}"#);
    assert_eq!((r.status, r.json()["code"].as_str()), (409, Some("23505")), "{}", r.body);
    let r = request_to(write_base(), "GET", "/handles?select=id", &[]);
    assert_eq!(r.json(), json!([{"id": 1}]), "{}", r.body);
}

/// The writer checkpoints the log in the first pause after a burst of writes: the burst's
/// pages reach the database file with no further write (SQLite's own checkpoint would wait
/// for a commit that finds 1,000 pages in the log; this burst leaves about 600).
#[test]
fn a_burst_of_writes_is_checkpointed_in_the_pause_after_it() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("burst.db");
    let rules = "[blobs]\ninsert = { anon = \"true\" }\n";
    let base = serve_sqlite(
        &path,
        "CREATE TABLE blobs (id INTEGER PRIMARY KEY, body TEXT);",
        rules,
        Default::default(),
    );
    let before = std::fs::metadata(&path).expect("the file").len();
    // ~1.2 MB: some 600 pages written to the log.
    let rows: Vec<serde_json::Value> = (0..300).map(|i| json!({"id": i, "body": "x".repeat(4000)})).collect();
    let r = send_to(
        &base,
        "POST",
        "/blobs",
        &[("content-type", "application/json")],
        Some(&json!(rows).to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let started = std::time::Instant::now();
    while std::fs::metadata(&path).expect("the file").len() < before + 1_000_000 {
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "the log was not checkpointed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_schema_change_by_another_process_is_served_without_a_restart() {
    let base = write_base();
    assert_eq!(request_to(base, "GET", "/later", &[]).status, 404);
    rusqlite::Connection::open(write_db())
        .expect("open")
        .execute_batch("CREATE TABLE later (id INTEGER PRIMARY KEY); INSERT INTO later VALUES (1);")
        .expect("ddl");
    let started = std::time::Instant::now();
    loop {
        let r = request_to(base, "GET", "/later", &[]);
        if r.status == 200 {
            assert_eq!(r.json(), json!([{"id": 1}]));
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "not served after 3 s: {}", r.body);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn concurrent_inserts_share_commits_and_none_fails() {
    let base = write_base();
    let writers: Vec<_> = (0..250)
        .map(|t| {
            std::thread::spawn(move || {
                (0..2)
                    .map(|i| {
                        let id = 10_000 + t * 2 + i;
                        let body = format!(r#"{{"id": {id}, "list_id": 1, "title": "bulk"}}"#);
                        send_to(base, "POST", "/items", &[("content-type", "application/json")], Some(&body))
                            .status
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    let statuses: Vec<u16> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let r = request_to(
        base,
        "GET",
        "/items?select=id&id=gte.10000",
        &[("prefer", "count=exact"), ("range", "0-0")],
    );
    assert_eq!(r.header("content-range"), Some("0-0/500"), "{}", r.body);
}

#[test]
fn upserts_and_put() {
    let merge = [("prefer", "resolution=merge-duplicates,return=representation")];
    let r = post(
        "/items?select=id,title",
        &merge,
        r#"[{"id": 40, "list_id": 1, "title": "new", "done": false}]"#,
    );
    assert_eq!((r.status, r.json()), (201, json!([{"id": 40, "title": "new"}])), "{}", r.body);
    // The same key again: updated, so 200.
    let r = post(
        "/items?select=id,title",
        &merge,
        r#"[{"id": 40, "list_id": 1, "title": "newer", "done": false}]"#,
    );
    assert_eq!((r.status, r.json()), (200, json!([{"id": 40, "title": "newer"}])), "{}", r.body);
    // Ignoring duplicates writes nothing for them.
    let r = post(
        "/items?select=id,title",
        &[("prefer", "resolution=ignore-duplicates,return=representation")],
        r#"[{"id": 40, "list_id": 1, "title": "ignored", "done": false}]"#,
    );
    assert_eq!((r.status, r.json()), (201, json!([])), "{}", r.body);
    // A conflict target that is no unique key: PostgreSQL's 42P10.
    let r = post(
        "/items?on_conflict=title",
        &[("prefer", "resolution=merge-duplicates")],
        r#"{"id": 40, "list_id": 1, "title": "x", "done": false}"#,
    );
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("42P10")), "{}", r.body);
    // PUT: the row the URL names, whole.
    let put = |path: &str, body: &str| {
        send_to(
            write_base(),
            "PUT",
            path,
            &[("content-type", "application/json"), ("prefer", "return=representation")],
            Some(body),
        )
    };
    let r = put(
        "/items?id=eq.41&select=id,title",
        r#"{"id": 41, "list_id": 1, "title": "put", "done": false, "owner": null, "extra": null}"#,
    );
    assert_eq!((r.status, r.json()), (201, json!([{"id": 41, "title": "put"}])), "{}", r.body);
    let r = put(
        "/items?id=eq.41&select=id,title",
        r#"{"id": 41, "list_id": 1, "title": "again", "done": false, "owner": null, "extra": null}"#,
    );
    assert_eq!((r.status, r.json()), (200, json!([{"id": 41, "title": "again"}])), "{}", r.body);
    let r = put(
        "/items?id=eq.42",
        r#"{"id": 43, "list_id": 1, "title": "x", "done": false, "owner": null, "extra": null}"#,
    );
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("PGRST115")), "{}", r.body);
}

#[test]
fn the_demo_serves_its_films_from_sqlite() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut demo = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["demo", "--server-port", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start rowgate demo");
    let base = format!("http://127.0.0.1:{port}");
    crate::support::wait_ready(&base);
    let r = request_to(&base, "GET", "/films?select=title&year=lt.1960", &[]);
    let _ = demo.kill();
    let _ = demo.wait();
    assert_eq!((r.status, r.json()), (200, json!([{"title": "Seven Samurai"}])), "{}", r.body);
}

#[test]
fn a_read_longer_than_the_inline_budget_moves_to_a_blocking_thread_and_answers_the_same() {
    // 50,000 rows: a filter matching only the last one scans past the inline budget.
    let path = tempfile::tempdir().expect("temp dir").keep().join("scan.db");
    let schema = "CREATE TABLE big (id INTEGER PRIMARY KEY, tag TEXT NOT NULL);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)
        INSERT INTO big SELECT i, 'tag' || i FROM n;";
    let base = serve_sqlite(&path, schema, "[big]\nselect = { anon = \"true\" }\n", Default::default());
    let r = request_to(&base, "GET", "/big?tag=eq.tag50000", &[]);
    assert_eq!((r.status, r.json()), (200, serde_json::json!([{"id": 50000, "tag": "tag50000"}])));
    let r = request_to(&base, "GET", "/big?tag=like.tag4999*&select=id&order=id.desc&limit=2", &[]);
    assert_eq!((r.status, r.json()), (200, serde_json::json!([{"id": 49999}, {"id": 49998}])));
    // A row by key stays within the budget.
    let r = request_to(&base, "GET", "/big?id=eq.7", &[]);
    assert_eq!((r.status, r.json()), (200, serde_json::json!([{"id": 7, "tag": "tag7"}])));
}

#[test]
fn csv_and_form_bodies_are_read_by_each_column_type() {
    let csv =
        "id,list_id,title,done,extra\n700,1,\"csv, quoted\",true,\"{\"\"k\"\": [1, 2]}\"\n701,1,plain,f,NULL";
    let r = send_to(
        write_base(),
        "POST",
        "/items?select=id,title,done,extra",
        &[("content-type", "text/csv"), ("prefer", "return=representation")],
        Some(csv),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!([
            {"id": 700, "title": "csv, quoted", "done": true, "extra": {"k": [1, 2]}},
            {"id": 701, "title": "plain", "done": false, "extra": null}
        ])
    );
    let r = send_to(
        write_base(),
        "POST",
        "/items?select=id,done",
        &[("content-type", "application/x-www-form-urlencoded"), ("prefer", "return=representation")],
        Some("id=702&list_id=1&title=form&done=no"),
    );
    assert_eq!((r.status, r.json()), (201, serde_json::json!([{"id": 702, "done": false}])), "{}", r.body);
    // Text that is no JSON, for a JSON column: PostgreSQL's error.
    let r = send_to(
        write_base(),
        "POST",
        "/items",
        &[("content-type", "text/csv")],
        Some("id,list_id,title,extra\n703,1,x,{not json"),
    );
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("22P02")), "{}", r.body);
    assert_eq!(request_to(write_base(), "GET", "/items?id=eq.703", &[]).json(), serde_json::json!([]));
}

fn fts_base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("fts.db");
        let schema = "CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize = 'porter');
            INSERT INTO docs (rowid, title, body) VALUES (1, 'Cats and dogs', 'The quick brown fox jumps'),
              (2, 'Dogs only', 'lazy dog sleeping'), (3, 'Birds', 'cat food is tasty');
            CREATE TABLE plain (id INTEGER PRIMARY KEY, body TEXT);";
        let rules = "[docs]\nselect = { anon = \"true\" }\n[plain]\nselect = { anon = \"true\" }\n";
        serve_sqlite(&path, schema, rules, Default::default())
    })
}

#[test]
fn full_text_search_runs_on_fts5_tables() {
    let titles = |path: &str| {
        let r = request_to(fts_base(), "GET", path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["title"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(titles("/docs?body=fts.cat&select=title"), ["Birds"]);
    assert_eq!(titles("/docs?title=plfts.dogs%20only&select=title"), ["Dogs only"]);
    assert_eq!(titles("/docs?body=phfts(english).quick%20brown&select=title"), ["Cats and dogs"]);
    assert_eq!(titles("/docs?body=wfts.dog%20-cat&select=title"), ["Dogs only"]);
    assert_eq!(titles("/docs?body=fts.jump:*&select=title"), ["Cats and dogs"]);
    assert_eq!(titles("/docs?body=fts.lazy%20%26%20!cat&select=title"), ["Dogs only"]);
    assert_eq!(titles("/docs?body=plfts.%2C%3B&select=title"), Vec::<String>::new());
    // Matches side by side under `or` are each the table's scan: FTS5 answers those.
    assert_eq!(
        titles("/docs?or=(body.fts.cat,body.fts.lazy)&select=title&order=title"),
        ["Birds", "Dogs only"]
    );
    // What FTS5 cannot say is refused, never answered differently.
    for path in ["/docs?body=fts.!cat", "/plain?body=fts.cat", "/docs?or=(body.fts.cat,title.eq.x)"] {
        let r = request_to(fts_base(), "GET", path, &[]);
        assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("RG501")), "{path}: {}", r.body);
    }
    // The index's own tables are not the API's.
    assert_eq!(request_to(fts_base(), "GET", "/docs_data", &[]).status, 404);
}

/// A new server with the response cache on (one per test: another test's writes would turn
/// the expected hits into misses), and its SQLite file (for another process's writes).
fn cached() -> (String, std::path::PathBuf) {
    let path = tempfile::tempdir().expect("temp dir").keep().join("cached.db");
    let schema = "CREATE TABLE parents (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE children (id INTEGER PRIMARY KEY, owner TEXT,
          parent_id INTEGER REFERENCES parents (id) ON DELETE CASCADE);
        CREATE VIEW parent_names AS SELECT name FROM parents;
        INSERT INTO parents VALUES (1, 'one'), (2, 'two'), (3, 'three');
        INSERT INTO children VALUES (1, 'ann', 1), (2, 'bob', 1), (3, 'ann', 2);";
    let rules = r#"
        [parents]
        select = { anon = "true" }
        insert = { anon = "true" }
        update = { anon = "true" }
        delete = { anon = "true" }
        [children]
        select = { anon = "true", authenticated = "owner=eq.@jwt.sub" }
        insert = { anon = "true" }
        [parent_names]
        select = { anon = "true" }
    "#;
    let args = rowgate::config::ServeArgs { cache_enabled: Some(true), ..Default::default() };
    (serve_sqlite(&path, schema, rules, args), path)
}

/// GET through the cache: (X-Cache, body).
fn cached_get(base: &str, path: &str, headers: &[(&str, &str)]) -> (String, serde_json::Value) {
    let r = request_to(base, "GET", path, headers);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    (r.header("x-cache").unwrap_or("none").to_owned(), r.json())
}

#[test]
fn the_cache_on_sqlite_answers_from_memory_until_a_write_changes_what_it_read() {
    let (base, _) = &cached();
    let path = "/parents?id=lte.2&select=name&order=id";
    assert_eq!(cached_get(base, path, &[]), ("miss".into(), json!([{"name": "one"}, {"name": "two"}])));
    assert_eq!(cached_get(base, path, &[]).0, "hit");
    // A write through rowgate: the next read sees it.
    let r = send_to(
        base,
        "PATCH",
        "/parents?id=eq.2",
        &[("content-type", "application/json")],
        Some(r#"{"name": "TWO"}"#),
    );
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(cached_get(base, path, &[]), ("miss".into(), json!([{"name": "one"}, {"name": "TWO"}])));
    // A view is invalidated with the tables it reads, and only with those.
    let view = "/parent_names?name=eq.three";
    assert_eq!(cached_get(base, view, &[]).1, json!([{"name": "three"}]));
    assert_eq!(cached_get(base, view, &[]).0, "hit");
    let json_body = [("content-type", "application/json")];
    let r =
        send_to(base, "POST", "/children", &json_body, Some(r#"{"id": 9, "owner": "cy", "parent_id": 3}"#));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(cached_get(base, view, &[]).0, "hit");
    send_to(
        base,
        "PATCH",
        "/parents?id=eq.3",
        &[("content-type", "application/json")],
        Some(r#"{"name": "3"}"#),
    );
    assert_eq!(cached_get(base, view, &[]), ("miss".into(), json!([])));
}

#[test]
fn the_cache_on_sqlite_sees_another_process_writes_and_cascades() {
    let (base, file) = &cached();
    let path = "/children?select=id&order=id&parent_id=eq.2";
    assert_eq!(cached_get(base, path, &[]).1, json!([{"id": 3}]));
    assert_eq!(cached_get(base, path, &[]).0, "hit");
    // Another process writes the file: the very next read is answered from the database.
    let other = rusqlite::Connection::open(file).expect("open");
    other.execute("INSERT INTO children VALUES (4, 'bob', 2)", []).expect("insert");
    assert_eq!(cached_get(base, path, &[]), ("miss".into(), json!([{"id": 3}, {"id": 4}])));
    // A delete that cascades to children invalidates answers about children.
    assert_eq!(cached_get(base, path, &[]).0, "hit");
    let r = send_to(base, "DELETE", "/parents?id=eq.2", &[], None);
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(cached_get(base, path, &[]), ("miss".into(), json!([])));
}

#[test]
fn the_cache_on_sqlite_never_shares_an_answer_between_callers_whose_rules_differ() {
    let (base, _) = &cached();
    let path = "/children?select=id&order=id&parent_id=eq.1";
    let ann = format!("Bearer {}", signed(json!({"role": "authenticated", "sub": "ann"})));
    let bob = format!("Bearer {}", signed(json!({"role": "authenticated", "sub": "bob"})));
    assert_eq!(cached_get(base, path, &[("authorization", &ann)]), ("miss".into(), json!([{"id": 1}])));
    assert_eq!(cached_get(base, path, &[("authorization", &ann)]), ("hit".into(), json!([{"id": 1}])));
    assert_eq!(cached_get(base, path, &[("authorization", &bob)]), ("miss".into(), json!([{"id": 2}])));
    assert_eq!(cached_get(base, path, &[("authorization", &bob)]), ("hit".into(), json!([{"id": 2}])));
}

#[test]
fn casts_to_the_types_sqlite_has() {
    check(
        "/authors?select=id::text,name,score:id::numeric,on:active::text::boolean&id=eq.1",
        200,
        json!([{"id": "1", "name": "ann", "score": 1, "on": true}]),
    );
    check("/posts?select=id,score::int&id=eq.3", 200, json!([{"id": 3, "score": 3}]));
    check("/authors?select=id,meta::json&id=eq.3", 200, json!([{"id": 3, "meta": [1, 2]}]));
    // A type SQLite does not have, as PostgreSQL answers a type it does not have.
    let r = request_to(base(), "GET", "/authors?select=id::uuid", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("42704")), "{}", r.body);
}

#[test]
fn regular_expressions_match_and_imatch() {
    check("/authors?select=name&name=match.^[ab]&order=id", 200, json!([{"name": "ann"}, {"name": "bob"}]));
    check("/authors?select=name&name=imatch.^c", 200, json!([{"name": "Cy"}]));
    check("/authors?select=name&name=not.match.n$&order=id", 200, json!([{"name": "bob"}, {"name": "Cy"}]));
    let r = request_to(base(), "GET", "/authors?name=match.(", &[]);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("2201B")), "{}", r.body);
}

#[test]
fn the_cache_on_sqlite_flushes_on_writes_no_hook_reports() {
    // A trigger's `DELETE` without `WHERE` is SQLite's truncate optimization: no update hook.
    let path = tempfile::tempdir().expect("temp dir").keep().join("trigger.db");
    let schema = "CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE log (line TEXT);
        INSERT INTO log VALUES ('a'), ('b');
        CREATE TRIGGER clear_log AFTER INSERT ON events BEGIN DELETE FROM log; END;";
    let rules = "[events]\nselect = { anon = \"true\" }\ninsert = { anon = \"true\" }\n[log]\nselect = { anon = \"true\" }\n";
    let args = rowgate::config::ServeArgs { cache_enabled: Some(true), ..Default::default() };
    let base = serve_sqlite(&path, schema, rules, args);
    assert_eq!(cached_get(&base, "/log?order=line", &[]).1, json!([{"line": "a"}, {"line": "b"}]));
    assert_eq!(cached_get(&base, "/log?order=line", &[]).0, "hit");
    let r = send_to(&base, "POST", "/events", &[("content-type", "application/json")], Some(r#"{"id": 1}"#));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(cached_get(&base, "/log?order=line", &[]), ("miss".into(), json!([])));
}

/// `everyone` in a rule covers visitors and signed-in callers alike; a rule for `anon` alone
/// leaves a signed-in caller out, and its 403 says why.
#[test]
fn everyone_covers_visitors_and_users_and_a_refused_user_is_told_why() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("everyone.db");
    let base = serve_sqlite(
        &path,
        "CREATE TABLE posts (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO posts VALUES (1, 'hello');
         CREATE TABLE drafts (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO drafts VALUES (1, 'soon');",
        "[posts]\nselect = { everyone = \"true\" }\n[drafts]\nselect = { anon = \"true\" }\n",
        rowgate::config::ServeArgs::default(),
    );
    let user = format!("Bearer {}", crate::accounts::token_of("authenticated"));
    for headers in [vec![], vec![("authorization", user.as_str())]] {
        let r = crate::support::send_to(&base, "GET", "/posts", &headers, None);
        assert_eq!((r.status, r.json()), (200, serde_json::json!([{"id": 1, "title": "hello"}])));
    }
    let r = crate::support::send_to(&base, "GET", "/drafts", &[("authorization", &user)], None);
    assert_eq!(
        (r.status, r.json()),
        (
            403,
            serde_json::json!({"code": "42501", "details": null,
                "hint": "The rule for anon covers visitors only; `everyone = ...` in [drafts] covers signed-in callers too",
                "message": "permission denied for table drafts"})
        )
    );
}

/// The access rules file is read again when it changes, without a restart; the response cache
/// serves nothing the old rules allowed; a file that does not parse is refused and the rules in
/// force stay.
#[test]
fn rules_changed_on_disk_take_effect_at_once_and_a_broken_file_changes_nothing() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("reload.db");
    let base = serve_sqlite(
        &path,
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes VALUES (1, 'hi');",
        "[notes]\nselect = { anon = \"true\" }\n",
        rowgate::config::ServeArgs { cache_enabled: Some(true), ..Default::default() },
    );
    let rules = path.with_extension("rules.toml");
    let read = || crate::support::send_to(&base, "GET", "/notes", &[], None).status;
    assert_eq!(read(), 200);
    assert_eq!(read(), 200, "cached");
    let until = |status: u16| {
        for _ in 0..60 {
            if read() == status {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("still not {status}");
    };
    std::fs::write(&rules, "[notes]\nselect = { editor = \"true\" }\n").unwrap();
    until(401);
    std::fs::write(&rules, "[notes]\nselect = { anon = \"this is not a filter\" }\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(read(), 401, "a broken file changes nothing");
    std::fs::write(&rules, "[notes]\nselect = { everyone = \"id=eq.1\" }\n").unwrap();
    until(200);
}
