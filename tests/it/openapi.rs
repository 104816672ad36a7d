//! The API root (`GET /`): PostgREST's OpenAPI 2.0 description of a schema as the caller may
//! use it, OpenAPI 3.1 by its media type, `openapi-mode`, `openapi-security-active`,
//! `openapi-server-proxy-uri` and `db-root-spec`, on PostgreSQL (schema `shop`) and SQLite. Both
//! versions are checked by two independent validators, openapi-spec-validator (PyPI) and
//! Redocly's CLI (npm).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::support::{default_args, harness, send_to, sql, start_server, Resp, JWT_SECRET};

pub fn schema() {
    static SCHEMA: OnceLock<()> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        sql(r#"
DROP SCHEMA IF EXISTS shop CASCADE;
DROP SCHEMA IF EXISTS shop_auth CASCADE;
CREATE SCHEMA shop_auth;
CREATE TABLE shop_auth.users (id int PRIMARY KEY);
CREATE SCHEMA shop;
COMMENT ON SCHEMA shop IS $$Shop API

Everything the shop sells$$;
GRANT USAGE ON SCHEMA shop TO web_anon, web_user;
CREATE TYPE shop.mood AS ENUM ('happy', 'sad');
CREATE TABLE shop.products (
  id serial PRIMARY KEY,
  name varchar(40) NOT NULL,
  price numeric DEFAULT 9.5,
  mood shop.mood DEFAULT 'happy',
  tags text[],
  meta jsonb,
  added date DEFAULT '2020-01-01',
  -- As PostgreSQL writes it: no RFC 3339 date-time.
  restocked timestamptz DEFAULT '2020-01-02 03:04:05+00'
);
COMMENT ON TABLE shop.products IS $$Products
What the shop sells$$;
COMMENT ON COLUMN shop.products.name IS 'Shown to customers';
CREATE TABLE shop.reviews (id int PRIMARY KEY, product_id int REFERENCES shop.products (id), body text,
                           shouted text GENERATED ALWAYS AS (upper(body)) STORED);
-- A key to another schema's table: no note of it.
CREATE TYPE shop.address AS (street text, city text);
CREATE TABLE shop.profiles (id int PRIMARY KEY REFERENCES shop_auth.users (id), address shop.address);
-- Two column names that make the same component name.
CREATE TABLE shop."お客様" ("名前" text, "住所" text);
CREATE TABLE shop.events (id int, part int) PARTITION BY LIST (part);
CREATE TABLE shop.events_1 PARTITION OF shop.events FOR VALUES IN (1);
CREATE FUNCTION shop.upload(bytea) RETURNS int LANGUAGE sql AS $$ SELECT length($1) $$;
CREATE TABLE shop.ledger (id int PRIMARY KEY, amount numeric NOT NULL);
CREATE VIEW shop.cheap AS SELECT id, name FROM shop.products WHERE price < 10;
CREATE FUNCTION shop.add(a int, b int DEFAULT 1) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT a + b $$;
COMMENT ON FUNCTION shop.add IS 'Adds two numbers';
CREATE FUNCTION shop.restock(n int) RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION shop.audit() RETURNS void LANGUAGE sql AS $$ SELECT $$;
REVOKE EXECUTE ON FUNCTION shop.audit() FROM PUBLIC;
CREATE FUNCTION shop.root_doc() RETURNS json LANGUAGE sql STABLE AS $$ SELECT '{"swagger": "2.0", "info": {"title": "Mine"}}'::json $$;
GRANT SELECT ON shop.products, shop.reviews, shop.cheap TO web_anon;
GRANT SELECT ON shop.products TO web_user;
GRANT SELECT, INSERT ON shop.reviews TO web_user;
GRANT SELECT, INSERT, UPDATE, DELETE ON shop.ledger TO web_user;
GRANT SELECT ON shop.profiles, shop."お客様", shop.events TO web_user;
"#);
    });
}

/// A server of schema `shop`, changed by `with`.
fn server(with: fn(&mut rowgate::config::ServeArgs)) -> String {
    schema();
    let mut args = default_args(&harness().superuser_uri);
    args.db_schemas = Some("shop".into());
    with(&mut args);
    start_server(args)
}

fn shop() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| server(|_| {}))
}

fn token(role: &str) -> String {
    let t = encode(
        &Header::new(Algorithm::HS256),
        &json!({"role": role}),
        &EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    );
    format!("Bearer {}", t.expect("token"))
}

fn root(base: &str, headers: &[(&str, &str)]) -> Resp {
    send_to(base, "GET", "/", headers, None)
}

fn paths(doc: &Value) -> Vec<(String, Vec<String>)> {
    doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .map(|(p, item)| (p.clone(), item.as_object().expect("item").keys().cloned().collect()))
        .collect()
}

fn methods(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    list.iter().map(|(p, m)| (p.to_string(), m.iter().map(|s| s.to_string()).collect())).collect()
}

#[test]
fn the_root_describes_what_the_anonymous_role_may_use() {
    let r = root(shop(), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/openapi+json; charset=utf-8"));
    let doc = r.json();
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(doc["info"]["title"], "Shop API");
    assert_eq!(doc["info"]["description"], "Everything the shop sells");
    // The server's own address, as PostgREST names it.
    assert_eq!((doc["host"].as_str(), doc["basePath"].as_str()), (shop().strip_prefix("http://"), Some("/")));
    // No ledger (no grant) and no audit (no EXECUTE); reviews only read; restock is volatile.
    assert_eq!(
        paths(&doc),
        methods(&[
            ("/", &["get"]),
            ("/cheap", &["get"]),
            ("/products", &["get"]),
            ("/reviews", &["get"]),
            ("/rpc/add", &["get", "post"]),
            ("/rpc/restock", &["post"]),
            ("/rpc/root_doc", &["get", "post"]),
            ("/rpc/upload", &["post"]),
        ])
    );
    assert_eq!(
        doc["definitions"]["products"],
        json!({
            "description": "Products\nWhat the shop sells",
            "required": ["id", "name"],
            "properties": {
                "id": {"description": "Note:\nThis is a Primary Key.<pk/>", "format": "int32", "type": "integer"},
                "name": {"description": "Shown to customers", "format": "character varying", "maxLength": 40, "type": "string"},
                "price": {"default": 9.5, "format": "numeric", "type": "number"},
                "mood": {"default": "happy", "enum": ["happy", "sad"], "format": "shop.mood", "type": "string"},
                "tags": {"format": "text[]", "items": {"type": "string"}, "type": "array"},
                "meta": {"format": "jsonb"},
                "added": {"default": "2020-01-01", "format": "date", "type": "string"},
                "restocked": {
                    "default": "2020-01-02 03:04:05+00",
                    "format": "timestamp with time zone",
                    "type": "string"
                },
            },
            "type": "object",
        })
    );
    assert_eq!(
        doc["definitions"]["reviews"]["properties"]["product_id"]["description"],
        "Note:\nThis is a Foreign Key to `products.id`.<fk table='products' column='id'/>"
    );
    // A generated column's expression is no default.
    assert_eq!(
        doc["definitions"]["reviews"]["properties"]["shouted"],
        json!({"format": "text", "type": "string"})
    );
    let products = &doc["paths"]["/products"]["get"];
    assert_eq!(
        (&products["summary"], &products["description"]),
        (&json!("Products"), &json!("What the shop sells"))
    );
    let refs: Vec<&str> =
        products["parameters"].as_array().unwrap().iter().map(|p| p["$ref"].as_str().unwrap()).collect();
    assert_eq!(
        refs,
        [
            "#/parameters/rowFilter.products.id",
            "#/parameters/rowFilter.products.name",
            "#/parameters/rowFilter.products.price",
            "#/parameters/rowFilter.products.mood",
            "#/parameters/rowFilter.products.tags",
            "#/parameters/rowFilter.products.meta",
            "#/parameters/rowFilter.products.added",
            "#/parameters/rowFilter.products.restocked",
            "#/parameters/select",
            "#/parameters/order",
            "#/parameters/range",
            "#/parameters/rangeUnit",
            "#/parameters/offset",
            "#/parameters/limit",
            "#/parameters/preferCount",
        ]
    );
    assert_eq!(
        doc["paths"]["/rpc/add"]["get"],
        json!({
            "tags": ["(rpc) add"],
            "summary": "Adds two numbers",
            "produces": ["application/json", "application/vnd.pgrst.object+json;nulls=stripped", "application/vnd.pgrst.object+json"],
            "parameters": [
                {"format": "int32", "in": "query", "name": "a", "required": true, "type": "integer"},
                {"format": "int32", "in": "query", "name": "b", "required": false, "type": "integer"},
            ],
            "responses": {"200": {"description": "OK"}},
        })
    );
    assert_eq!(doc.get("security"), None);
}

#[test]
fn a_token_shows_what_its_role_may_use() {
    let doc = root(shop(), &[("authorization", &token("web_user"))]).json();
    // The partitioned table, not its partition.
    assert_eq!(
        paths(&doc),
        methods(&[
            ("/", &["get"]),
            ("/events", &["get"]),
            ("/ledger", &["get", "post", "delete", "patch"]),
            ("/products", &["get"]),
            ("/profiles", &["get"]),
            ("/reviews", &["get", "post"]),
            ("/お客様", &["get"]),
            ("/rpc/add", &["get", "post"]),
            ("/rpc/restock", &["post"]),
            ("/rpc/root_doc", &["get", "post"]),
            ("/rpc/upload", &["post"]),
        ])
    );
    assert_eq!(
        doc["definitions"]["profiles"]["properties"]["id"]["description"],
        "Note:\nThis is a Primary Key.<pk/>"
    );
}

#[test]
fn ignore_privileges_security_and_a_proxy() {
    static BASE: OnceLock<String> = OnceLock::new();
    let base = BASE.get_or_init(|| {
        server(|a| {
            a.openapi_mode = Some(rowgate::config::OpenApiMode::IgnorePrivileges);
            a.openapi_security_active = Some(true);
            a.openapi_server_proxy_uri = Some("https://api.example.com/shop".into());
        })
    });
    let doc = root(base, &[]).json();
    let listed: Vec<String> = paths(&doc).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        listed,
        [
            "/",
            "/cheap",
            "/events",
            "/ledger",
            "/products",
            "/profiles",
            "/reviews",
            "/お客様",
            "/rpc/add",
            "/rpc/audit",
            "/rpc/restock",
            "/rpc/root_doc",
            "/rpc/upload"
        ]
    );
    assert_eq!(
        (&doc["host"], &doc["basePath"], &doc["schemes"]),
        (&json!("api.example.com:443"), &json!("/shop"), &json!(["https"]))
    );
    assert_eq!(doc["security"], json!([{"JWT": []}]));
    assert_eq!(
        doc["securityDefinitions"],
        json!({"JWT": {
            "description": "Add the token prepending \"Bearer \" (without quotes) to it",
            "in": "header",
            "name": "Authorization",
            "type": "apiKey",
        }})
    );
    let v31 = root(base, &[("accept", "application/vnd.oai.openapi+json;version=3.1")]).json();
    assert_eq!(v31["servers"], json!([{"url": "https://api.example.com/shop"}]));
    assert_eq!(v31["security"], json!([{"bearerAuth": []}, {"apiKey": []}]));
}

#[test]
fn openapi_mode_disabled_is_pgrst126() {
    let base = server(|a| a.openapi_mode = Some(rowgate::config::OpenApiMode::Disabled));
    let r = root(&base, &[]);
    assert_eq!(
        (r.status, r.json()),
        (
            404,
            json!({"code": "PGRST126", "details": null, "hint": null, "message": "Root endpoint metadata is disabled"})
        )
    );
}

#[test]
fn db_root_spec_answers_with_the_function() {
    let base = server(|a| a.db_root_spec = Some("root_doc".into()));
    let r = root(&base, &[("accept", "application/openapi+json")]);
    assert_eq!((r.status, r.json()), (200, json!({"swagger": "2.0", "info": {"title": "Mine"}})));
}

#[test]
fn the_root_negotiates_its_media_type() {
    let r = root(shop(), &[("accept", "application/json")]);
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/openapi+json; charset=utf-8")));
    let r = root(shop(), &[("accept", "text/csv")]);
    assert_eq!(
        (r.status, r.json()),
        (
            406,
            json!({"code": "PGRST107", "details": null, "hint": null, "message": "None of these media types are available: text/csv"})
        )
    );
    let r = send_to(shop(), "HEAD", "/", &[], None);
    assert_eq!(
        (r.status, r.body.as_str(), r.header("content-type")),
        (200, "", Some("application/openapi+json; charset=utf-8"))
    );
    let r = send_to(shop(), "POST", "/", &[], Some("{}"));
    assert_eq!(
        (r.status, r.json()),
        (
            405,
            json!({"code": "PGRST117", "details": null, "hint": null, "message": "Unsupported HTTP method: POST"})
        )
    );
    let r = root(shop(), &[("accept", "application/vnd.oai.openapi+json;version=3.1")]);
    assert_eq!(r.header("content-type"), Some("application/vnd.oai.openapi+json;version=3.1"));
    assert_eq!(r.json()["openapi"], "3.1.0");
    // The Supabase path names its own base.
    let doc = send_to(shop(), "GET", "/rest/v1/", &[], None).json();
    assert_eq!(doc["basePath"], "/rest/v1");
}

#[test]
fn openapi_31_describes_bodies_results_and_errors() {
    let doc = root(
        shop(),
        &[("accept", "application/vnd.oai.openapi+json"), ("authorization", &token("web_user"))],
    )
    .json();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["ledger"],
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "format": "int32"},
                "amount": {"type": "number"},
            },
            "required": ["id", "amount"],
        })
    );
    assert_eq!(schemas["ledger.insert"]["required"], json!(["id", "amount"]));
    assert_eq!(schemas["ledger.update"].get("required"), None);
    assert_eq!(schemas["products"]["properties"]["mood"]["enum"], json!(["happy", "sad", null]));
    assert_eq!(schemas["products"]["properties"]["name"]["maxLength"], 40);
    // A default as the format requires it (the validators check it against its schema).
    assert_eq!(
        schemas["products"]["properties"]["restocked"],
        json!({"type": ["string", "null"], "format": "date-time", "default": "2020-01-02T03:04:05+00:00"})
    );
    // reviews: read and insert only, so no update schema.
    assert_eq!(schemas.get("reviews.update"), None);
    assert_eq!(
        schemas["rpc_add.args"],
        json!({
            "type": "object",
            "properties": {"a": {"type": "integer", "format": "int32"}, "b": {"type": "integer", "format": "int32"}},
            "description": "Adds two numbers",
            "required": ["a"],
        })
    );
    assert_eq!(
        doc["paths"]["/rpc/add"]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
        json!({"type": ["integer", "null"], "format": "int32"})
    );
    assert_eq!(
        doc["paths"]["/rpc/restock"]["post"]["responses"]["204"],
        json!({"description": "No Content"})
    );
    let prefer = &doc["paths"]["/ledger"]["post"]["parameters"][3];
    assert_eq!(prefer["name"], "Prefer");
    assert!(prefer["schema"]["items"]["enum"]
        .as_array()
        .unwrap()
        .contains(&json!("resolution=merge-duplicates")));
    assert_eq!(schemas["Error"]["required"], json!(["code", "message"]));
    // A composite type is a component of its own, as PostgREST answers its values: objects.
    assert_eq!(
        schemas["profiles"]["properties"]["address"],
        json!({"anyOf": [{"$ref": "#/components/schemas/shop_address"}, {"type": "null"}]})
    );
    assert_eq!(
        schemas["shop_address"],
        json!({
            "type": "object",
            "description": "shop.address",
            "properties": {"street": {"type": ["string", "null"]}, "city": {"type": ["string", "null"]}},
        })
    );
    // The whole body of a function's single unnamed bytea argument.
    assert_eq!(
        doc["paths"]["/rpc/upload"]["post"]["requestBody"]["content"],
        json!({"application/octet-stream": {"schema": {"type": "string"}}})
    );
    // Two columns whose names make one component name, each its own filter.
    let filters: Vec<&str> = doc["paths"]["/お客様"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["$ref"].as_str())
        .filter(|r| r.contains("rowFilter"))
        .collect();
    assert_eq!(
        filters,
        ["#/components/parameters/rowFilter.___.__", "#/components/parameters/rowFilter.___.___2"]
    );
}

#[test]
fn a_reload_refreshes_the_description() {
    static BASE: OnceLock<String> = OnceLock::new();
    let base = BASE.get_or_init(|| server(|_| {}));
    assert!(root(base, &[]).json()["paths"].get("/arrivals").is_none());
    sql("CREATE TABLE shop.arrivals (id int); GRANT SELECT ON shop.arrivals TO web_anon; NOTIFY rowgate, 'reload schema';");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while root(base, &[]).json()["paths"].get("/arrivals").is_none() {
        assert!(std::time::Instant::now() < deadline, "the new table never appeared");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    sql("DROP TABLE shop.arrivals; NOTIFY rowgate, 'reload schema';");
}

/// Runs both validators on `doc`: openapi-spec-validator, and Redocly's CLI with its
/// structural rules (`spec`) for 2.0 and its recommended ones for 3.1.
fn validate(name: &str, doc: &Value) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    let python = root.join("tests/py/.venv/bin/python");
    assert!(
        python.exists(),
        "openapi-spec-validator is not installed: scripts/test installs tests/py/requirements.txt"
    );
    let out =
        Command::new(&python).args(["-m", "openapi_spec_validator"]).arg(&file).output().expect("python");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "openapi-spec-validator refused {name}:\n{report}");
    let redocly = root.join("tests/js/node_modules/.bin/redocly");
    assert!(redocly.exists(), "@redocly/cli is not installed: run `npm ci` in tests/js (scripts/test does)");
    let rules = if doc.get("swagger").is_some() { "spec" } else { "recommended" };
    let out = Command::new(&redocly)
        .args(["lint", "--format", "stylish", "--extends", rules])
        .arg(&file)
        .output()
        .expect("node is needed for @redocly/cli");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "redocly lint ({rules}) refused {name}:\n{report}");
}

#[test]
fn both_versions_pass_two_validators() {
    let v31 = [("accept", "application/vnd.oai.openapi+json;version=3.1")];
    // The shop, as a role that may write, and the test fixture's schema: every type, unicode
    // and reserved names, views, composite and set-returning functions.
    let user = token("web_user");
    let shop_user = [("authorization", user.as_str())];
    validate("shop-2.0", &root(shop(), &shop_user).json());
    validate("shop-3.1", &root(shop(), &[v31[0], shop_user[0]]).json());
    let fixture = harness().base.as_str();
    validate("test-2.0", &root(fixture, &[]).json());
    validate("test-3.1", &root(fixture, &v31).json());
    validate("test-3.1-user", &root(fixture, &[v31[0], ("authorization", &token("web_user"))]).json());
}

#[test]
fn on_sqlite_the_rules_decide() {
    static BASE: OnceLock<String> = OnceLock::new();
    let base = BASE.get_or_init(|| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("openapi.db");
        crate::sqlite::serve_sqlite(
            &path,
            "CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
             CREATE TABLE posts (id INTEGER PRIMARY KEY, title VARCHAR(80) NOT NULL, draft BOOLEAN DEFAULT 1,
                                 author_id INTEGER REFERENCES authors (id));
             CREATE TABLE secrets (id INTEGER PRIMARY KEY, body TEXT);",
            "[authors]\nselect = { anon = \"true\" }\n[posts]\nselect = { anon = \"true\", authenticated = \"true\" }\ninsert = { authenticated = \"true\" }\n",
            Default::default(),
        )
    });
    let doc = root(base, &[]).json();
    assert_eq!(paths(&doc), methods(&[("/", &["get"]), ("/authors", &["get"]), ("/posts", &["get"])]));
    assert_eq!(
        doc["definitions"]["posts"]["properties"],
        json!({
            "id": {"description": "Note:\nThis is a Primary Key.<pk/>", "format": "int64", "type": "integer"},
            "title": {"format": "character varying", "maxLength": 80, "type": "string"},
            "draft": {"default": true, "format": "boolean", "type": "boolean"},
            "author_id": {
                "description": "Note:\nThis is a Foreign Key to `authors.id`.<fk table='authors' column='id'/>",
                "format": "int64",
                "type": "integer",
            },
        })
    );
    let user = token("authenticated");
    let doc = root(base, &[("authorization", &user)]).json();
    assert_eq!(doc["paths"]["/posts"].as_object().unwrap().keys().collect::<Vec<_>>(), ["get", "post"]);
    validate("sqlite-2.0", &doc);
    validate(
        "sqlite-3.1",
        &root(base, &[("authorization", &user), ("accept", "application/vnd.oai.openapi+json")]).json(),
    );
}

#[test]
fn the_reference_page_is_off_unless_enabled() {
    assert_eq!(send_to(shop(), "GET", "/rowgate/docs/", &[], None).status, 404);
}

#[test]
fn the_reference_page_lists_the_tables_and_tries_a_request_in_a_browser() {
    let base = server(|a| a.api_docs_enabled = Some(true));
    sql("INSERT INTO shop.products (name, price) VALUES ('anvil', 5)");
    let r = send_to(&base, "GET", "/rowgate/docs/", &[], None);
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/html; charset=utf-8")));
    let seen = crate::support::page_test("docs_page.mjs", &[("ROWGATE_URL", &base), ("TABLE", "products")]);
    let report = seen.to_string();
    let tags: Vec<&str> = seen["tags"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(tags.contains(&"products") && tags.contains(&"reviews"), "{report}");
    assert_eq!(seen["status"], "200", "{report}");
    let rows: Value = serde_json::from_str(seen["body"].as_str().unwrap()).expect(&report);
    assert!(rows.as_array().unwrap().iter().any(|r| r["name"] == "anvil"), "{report}");
}
