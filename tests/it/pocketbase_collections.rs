//! PocketBase's collections API on both backends: a collection made, changed and dropped by a
//! superuser is a real table, its rules the table's rules on every door — the REST API's too —
//! and bad input gets PocketBase's answers. The SDK's own run (`--setup`) is in `pocketbase.rs`.

use serde_json::{json, Value};

use crate::pocketbase_realtime::token;
use crate::sqlite::serve_sqlite;
use crate::support::{default_args, send_to, sql_at, start_server};

#[test]
fn collections_are_tables_whose_rules_hold_on_every_door_on_sqlite() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("app.db");
    let base = serve_sqlite(
        &path,
        "CREATE TABLE made_in_sql (id TEXT PRIMARY KEY NOT NULL, n INTEGER);",
        "",
        Default::default(),
    );
    // SQLite's rules refuse a caller no rule admits: PostgREST's 401 for a visitor.
    let refused = (
        401,
        json!({"code": "42501", "details": null, "hint": null, "message": "permission denied for table authors"}),
    );
    exercise(&base, refused);
}

#[test]
fn collections_are_tables_whose_rules_hold_on_every_door_on_postgres() {
    let superuser = crate::pocketbase::database("pocketbase_collections");
    sql_at(
        &superuser,
        "CREATE SCHEMA pocketbase_app; GRANT USAGE ON SCHEMA pocketbase_app TO PUBLIC;
         CREATE TABLE pocketbase_app.made_in_sql (id text PRIMARY KEY, n integer);
         DO $$ BEGIN CREATE ROLE service_role NOLOGIN BYPASSRLS; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT service_role TO \"Authenticator\";",
    );
    let mut args = default_args(&superuser);
    args.db_schemas = Some("pocketbase_app".into());
    args.platform.pocketbase = Some(true);
    args.dashboard_db_uri = Some(superuser.clone());
    // Row-level security without a policy for the visitor: no row, as on Supabase.
    exercise(&start_server(args), (200, json!([])));
}

fn call(base: &str, method: &str, path: &str, auth: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(auth) = auth {
        headers.push(("authorization", auth));
    }
    let body = body.map(|b| b.to_string());
    let r = send_to(base, method, path, &headers, body.as_deref());
    let json = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, json)
}

/// A definition with its times as `DATE`.
fn dated(mut v: Value) -> Value {
    for key in ["created", "updated"] {
        if v.get(key).and_then(Value::as_str).is_some_and(|t| t.len() == 24) {
            v[key] = json!("DATE");
        }
    }
    v
}

fn exercise(base: &str, refused_visitor: (u16, Value)) {
    let root_token = token("service_role", "admin");
    let root = Some(root_token.as_str());
    let root_bearer = format!("Bearer {root_token}");
    let user = format!("Bearer {}", token("authenticated", "u1"));

    // Only a superuser may see or change collections.
    assert_eq!(
        call(base, "GET", "/api/collections", None, None),
        (
            401,
            json!({"data": {}, "message": "The request requires valid record authorization token.", "status": 401})
        )
    );
    assert_eq!(
        call(base, "GET", "/api/collections", Some(&user), None),
        (
            403,
            json!({"data": {}, "message": "The authorized record is not allowed to perform this action.", "status": 403})
        )
    );

    let authors = json!({"name": "authors", "listRule": "", "fields": [{"name": "name", "type": "text", "required": true}]});
    let (status, made) = call(base, "POST", "/api/collections", root, Some(authors));
    assert_eq!(
        (status, dated(made)),
        (
            200,
            json!({
                "id": "pbc_526341563", "listRule": "", "viewRule": null, "createRule": null, "updateRule": null,
                "deleteRule": null, "name": "authors", "type": "base",
                "fields": [
                    {"autogeneratePattern": "[a-z0-9]{15}", "help": "", "hidden": false, "id": "text3208210256",
                     "max": 15, "min": 15, "name": "id", "pattern": "^[a-z0-9]+$", "presentable": false,
                     "primaryKey": true, "required": true, "system": true, "type": "text"},
                    {"autogeneratePattern": "", "help": "", "hidden": false, "id": "text1579384326", "max": 0,
                     "min": 0, "name": "name", "pattern": "", "presentable": false, "primaryKey": false,
                     "required": true, "system": false, "type": "text"}
                ],
                "indexes": [], "created": "DATE", "updated": "DATE", "system": false
            })
        )
    );
    let (status, shown) =
        call(base, "GET", "/api/collections/pbc_526341563?fields=name,listRule", root, None);
    assert_eq!((status, shown), (200, json!({"listRule": "", "name": "authors"})));

    // No create rule: the superusers' alone, at PocketBase's door and at the REST API's.
    let ann = json!({"name": "ann"});
    assert_eq!(
        call(base, "POST", "/api/collections/authors/records", None, Some(ann.clone())),
        (403, json!({"data": {}, "message": "Only superusers can perform this action.", "status": 403}))
    );
    let (status, _) = call(base, "POST", "/authors", None, Some(ann.clone()));
    assert!(status == 401 || status == 403, "{status}");
    let (status, record) = call(base, "POST", "/api/collections/authors/records", root, Some(ann));
    assert_eq!(status, 200, "{record}");
    let ann_id = record["id"].as_str().expect("an id").to_owned();
    assert_eq!(call(base, "GET", "/authors?select=name", None, None), (200, json!([{"name": "ann"}])));

    // Rules, fields and the name changed at once: the REST API sees the same.
    let changed = json!({
        "listRule": null, "createRule": "",
        "fields": [{"id": "text1579384326", "name": "title", "type": "text", "required": true}, {"name": "age", "type": "number"}]
    });
    let (status, after) = call(base, "PATCH", "/api/collections/authors", root, Some(changed));
    assert_eq!(status, 200, "{after}");
    assert_eq!(
        after["fields"].as_array().map(|f| f.iter().map(|f| f["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("id"), json!("title"), json!("age")])
    );
    assert_eq!(call(base, "GET", "/authors?select=title,age", None, None), refused_visitor);
    assert_eq!(
        call(base, "GET", "/api/collections/authors/records", None, None),
        (403, json!({"data": {}, "message": "Only superusers can perform this action.", "status": 403}))
    );
    let (status, bob) = call(
        base,
        "POST",
        "/api/collections/authors/records?fields=title,age",
        None,
        Some(json!({"title": "bob", "age": "7"})),
    );
    assert_eq!((status, bob), (200, json!({"title": "bob", "age": 7})));
    assert_eq!(
        call(base, "POST", "/api/collections/authors/records", None, Some(json!({"age": 1}))),
        (
            400,
            json!({"data": {"title": {"code": "validation_required", "message": "Cannot be blank."}}, "message": "Failed to create record.", "status": 400})
        )
    );

    // A relation: a foreign key, its cascade the database's.
    let posts = json!({"name": "posts", "listRule": "", "viewRule": "", "createRule": "", "fields": [
        {"name": "title", "type": "text"},
        {"name": "author", "type": "relation", "collectionId": "pbc_526341563", "cascadeDelete": true, "maxSelect": 1},
        {"name": "created", "type": "autodate", "onCreate": true}
    ]});
    assert_eq!(call(base, "POST", "/api/collections", root, Some(posts)).0, 200);
    let (status, post) = call(
        base,
        "POST",
        "/api/collections/posts/records?expand=author&fields=title,author,expand.author.title",
        None,
        Some(json!({"title": "hi", "author": ann_id})),
    );
    // Authors may no longer be listed or viewed by a visitor: the author is not expanded.
    assert_eq!((status, post), (200, json!({"title": "hi", "author": ann_id, "expand": {}})));
    let path = "/api/collections/posts/records?expand=author&fields=expand.author.title";
    let (status, listed) = call(base, "GET", path, root, None);
    assert_eq!((status, &listed["items"][0]), (200, &json!({"expand": {"author": {"title": "ann"}}})));
    let (status, orphan) = call(
        base,
        "POST",
        "/api/collections/posts/records?fields=author",
        None,
        Some(json!({"title": "alone", "author": ""})),
    );
    assert_eq!((status, orphan), (200, json!({"author": ""})));
    assert_eq!(
        call(base, "DELETE", "/api/collections/authors", root, None),
        (
            400,
            json!({"data": {}, "message": "Failed to delete collection probably due to existing reference in posts.", "status": 400})
        )
    );
    assert_eq!(call(base, "DELETE", "/api/collections/authors/truncate", root, None), (204, Value::Null));
    let (_, left) = call(base, "GET", "/api/collections/posts/records?fields=title", None, None);
    assert_eq!(left["items"], json!([{"title": "alone"}]), "the cascade took ann's post");

    // The list: collections made here and tables made in SQL, filtered and sorted.
    let (status, listed) = call(base, "GET", "/api/collections?sort=-name&fields=name,type", root, None);
    assert_eq!(
        (status, listed),
        (
            200,
            json!({"items": [{"name": "posts", "type": "base"}, {"name": "made_in_sql", "type": "base"}, {"name": "authors", "type": "base"}], "page": 1, "perPage": 30, "totalItems": 3, "totalPages": 1})
        )
    );
    let (status, listed) =
        call(base, "GET", "/api/collections?filter=name~'AUTH'&fields=name&skipTotal=1", root, None);
    assert_eq!(
        (status, listed),
        (
            200,
            json!({"items": [{"name": "authors"}], "page": 1, "perPage": 30, "totalItems": -1, "totalPages": -1})
        )
    );

    // Bad input gets PocketBase's answers.
    let bad = json!({"name": "Authors", "fields": [{"name": "x", "type": "text"}, {"name": "X", "type": "bool"}, {"name": "expand", "type": "text"}]});
    assert_eq!(
        call(base, "POST", "/api/collections", root, Some(bad)),
        (
            400,
            json!({"data": {
            "name": {"code": "validation_collection_name_exists", "message": "Collection name must be unique (case insensitive)."},
            "fields": {
                "2": {"name": {"code": "validation_duplicated_field_name", "message": "Duplicated or invalid field name X.", "params": {"fieldName": "X"}}}
            }
        }, "message": "Failed to create collection.", "status": 400})
        )
    );
    assert_eq!(
        call(
            base,
            "POST",
            "/api/collections",
            root,
            Some(
                json!({"name": "a; drop table x", "fields": [{"name": "r", "type": "relation", "collectionId": "nope"}]})
            )
        ),
        (
            400,
            json!({"data": {
            "name": {"code": "validation_match_invalid", "message": "Must be in a valid format."},
            "fields": {"1": {"collectionId": {"code": "validation_field_relation_missing_collection", "message": "The relation collection doesn't exist."}}}
        }, "message": "Failed to create collection.", "status": 400})
        )
    );
    assert_eq!(
        call(
            base,
            "POST",
            "/api/collections",
            root,
            Some(json!({"name": "x", "fields": [{"name": "q", "type": "nope"}]}))
        ),
        (
            400,
            json!({"data": {}, "message": "Failed to load the submitted data due to invalid formatting.", "status": 400})
        )
    );
    // A rule naming no field of the collection, and one that does not parse.
    let ruled = json!({"name": "ruled", "listRule": "owner = @request.auth.id"});
    let (status, e) = call(base, "POST", "/api/collections", root, Some(ruled));
    assert_eq!((status, &e["data"]["listRule"]["code"]), (400, &json!("validation_invalid_rule")), "{e}");
    let ruled = json!({"name": "ruled", "viewRule": "(title = 'x'"});
    assert_eq!(
        call(base, "POST", "/api/collections", root, Some(ruled)),
        (
            400,
            json!({"data": {"viewRule": {"code": "validation_invalid_rule", "message": "Invalid rule. Raw error: a group is not closed."}}, "message": "Failed to create collection.", "status": 400})
        )
    );
    let (status, e) =
        call(base, "PATCH", "/api/collections/made_in_sql", root, Some(json!({"listRule": ""})));
    assert_eq!(status, 400, "{e}");

    owned_notes(base, root);

    // Dropped: gone from both doors.
    assert_eq!(call(base, "DELETE", "/api/collections/posts", root, None), (204, Value::Null));
    assert_eq!(call(base, "DELETE", "/api/collections/authors", root, None), (204, Value::Null));
    assert_eq!(
        call(base, "GET", "/api/collections/authors", root, None),
        (404, json!({"data": {}, "message": "The requested resource wasn't found.", "status": 404}))
    );
    let (status, _) = call(base, "GET", "/authors", Some(&root_bearer), None);
    assert_eq!(status, 404);
}

/// Notes a signed-in caller owns, and public ones anyone reads: PocketBase's rules with
/// expressions, enforced at its door and at the REST API's alike.
fn owned_notes(base: &str, root: Option<&str>) {
    let notes = json!({
        "name": "notes",
        "fields": [{"name": "owner", "type": "text"}, {"name": "body", "type": "text"}, {"name": "public", "type": "bool"}],
        "listRule": "public = true || owner = @request.auth.id",
        "viewRule": "public = true || owner = @request.auth.id",
        "createRule": "@request.auth.id != '' && owner = @request.auth.id",
        "updateRule": "owner = @request.auth.id",
        "deleteRule": "owner = @request.auth.id"
    });
    let (status, made) = call(base, "POST", "/api/collections", root, Some(notes));
    assert_eq!(status, 200, "{made}");
    let (ann_token, bob_token) = (token("authenticated", "ann"), token("authenticated", "bob"));
    let (ann, bob) = (Some(ann_token.as_str()), Some(bob_token.as_str()));
    let ann_bearer = format!("Bearer {ann_token}");
    let failed = (400, json!({"data": {}, "message": "Failed to create record.", "status": 400}));
    let note =
        |owner: &str, body: &str, public: bool| json!({"owner": owner, "body": body, "public": public});
    let create = |who, body| call(base, "POST", "/api/collections/notes/records", who, Some(body));
    assert_eq!(create(None, note("", "anon", true)), failed);
    assert_eq!(create(ann, note("bob", "forged", true)), failed);
    let mut ids = Vec::new();
    for (who, owner, body, public) in [
        (ann, "ann", "ann's secret", false),
        (ann, "ann", "ann's news", true),
        (bob, "bob", "bob's secret", false),
    ] {
        let (status, r) = create(who, note(owner, body, public));
        assert_eq!(status, 200, "{r}");
        ids.push(r["id"].as_str().expect("an id").to_owned());
    }
    let bodies = |who: Option<&str>| {
        let (status, r) =
            call(base, "GET", "/api/collections/notes/records?sort=body&fields=body", who, None);
        assert_eq!(status, 200, "{r}");
        r["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["body"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(bodies(None), ["ann's news"]);
    assert_eq!(bodies(ann), ["ann's news", "ann's secret"]);
    assert_eq!(bodies(bob), ["ann's news", "bob's secret"]);
    // The REST API reads under the same rules.
    assert_eq!(
        call(base, "GET", "/notes?select=body&order=body", None, None),
        (200, json!([{"body": "ann's news"}]))
    );
    assert_eq!(
        call(base, "GET", "/notes?select=body&order=body", Some(&ann_bearer), None),
        (200, json!([{"body": "ann's news"}, {"body": "ann's secret"}]))
    );
    // Another's note is not there to view, update or delete; one's own is.
    let missing =
        (404, json!({"data": {}, "message": "The requested resource wasn't found.", "status": 404}));
    let path = format!("/api/collections/notes/records/{}", ids[0]);
    assert_eq!(call(base, "PATCH", &path, bob, Some(json!({"body": "taken"}))), missing);
    assert_eq!(call(base, "GET", &path, bob, None), missing);
    assert_eq!(call(base, "DELETE", &path, bob, None), missing);
    let (status, r) = call(base, "PATCH", &format!("{path}?fields=body"), ann, Some(json!({"body": "kept"})));
    assert_eq!((status, r), (200, json!({"body": "kept"})));
    assert_eq!(call(base, "DELETE", &path, ann, None), (204, Value::Null));

    // A list rule other than the view rule: PocketBase's door lists by one and views by the other.
    let narrower = json!({"listRule": "owner = @request.auth.id", "viewRule": "public = true"});
    let (status, r) = call(base, "PATCH", "/api/collections/notes", root, Some(narrower));
    assert_eq!(status, 200, "{r}");
    assert_eq!(bodies(bob), ["bob's secret"]);
    let (status, r) =
        call(base, "GET", &format!("/api/collections/notes/records/{}?fields=body", ids[1]), bob, None);
    assert_eq!((status, r), (200, json!({"body": "ann's news"})));
    assert_eq!(call(base, "GET", &format!("/api/collections/notes/records/{}", ids[2]), bob, None), missing);
    // A rule through a relation is not enforced yet, so it is refused rather than stored.
    let (status, e) =
        call(base, "PATCH", "/api/collections/notes", root, Some(json!({"listRule": "owner.name = 'x'"})));
    assert_eq!((status, &e["data"]["listRule"]["code"]), (400, &json!("validation_invalid_rule")), "{e}");
    assert_eq!(call(base, "DELETE", "/api/collections/notes", root, None), (204, Value::Null));
}
