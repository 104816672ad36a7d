//! The SQLite twin of the PostgreSQL fixture: the tables the read, embedding and write tests use,
//! with SQLite's types for PostgreSQL's (arrays and jsonb as JSON, dates and timestamps as their
//! JSON text) and the same rows, copied from the PostgreSQL fixture itself, so that a test's one
//! expected response holds on both backends. Access rules stand in for the fixture's grants.

use std::cell::RefCell;
use std::sync::OnceLock;

const SCHEMA: &str = r#"
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, price REAL, tags JSON,
  created TEXT, data JSON, category_id INTEGER REFERENCES categories (id));
CREATE TABLE actors (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE films (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
CREATE TABLE roles (actor_id INTEGER REFERENCES actors (id), film_id INTEGER REFERENCES films (id),
  character TEXT, PRIMARY KEY (actor_id, film_id));
CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, budget REAL);
CREATE TABLE tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, done BOOLEAN NOT NULL DEFAULT 0,
  priority INTEGER DEFAULT 3 CHECK (priority BETWEEN 1 AND 5), tags JSON, meta JSON, due TEXT,
  project_id INTEGER REFERENCES projects (id));
CREATE TABLE task_details (task_id INTEGER PRIMARY KEY REFERENCES tasks (id), notes TEXT);
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL CHECK (body <> 'forbidden'),
  author TEXT DEFAULT 'anonymous', created TEXT DEFAULT '2024-01-01T00:00:00');
CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL);
CREATE TABLE order_lines (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id INTEGER NOT NULL REFERENCES orders (id),
  product TEXT NOT NULL CHECK (product <> 'forbidden'), qty INTEGER NOT NULL DEFAULT 1);
CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, mentor_id INTEGER REFERENCES people (id));
CREATE TABLE friendships (id INTEGER PRIMARY KEY, first_id INTEGER NOT NULL REFERENCES people (id),
  second_id INTEGER NOT NULL REFERENCES people (id));
CREATE TABLE documents (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, body TEXT, is_public BOOLEAN NOT NULL DEFAULT 0);
"#;

/// The fixture's grants: everyone reads every table; these are writable too.
const WRITABLE: [&str; 5] = ["projects", "tasks", "notes", "orders", "order_lines"];

/// Access rules standing in for the grants.
fn rules() -> String {
    let mut rules = String::new();
    for table in TABLES {
        rules.push_str(&format!("[{table}]\n"));
        let ops: &[&str] =
            if WRITABLE.contains(&table) { &["select", "insert", "update", "delete"] } else { &["select"] };
        for op in ops {
            rules.push_str(&format!("{op} = {{ anon = \"true\", authenticated = \"true\" }}\n"));
        }
    }
    rules
}

/// Tables copied, parents first.
const TABLES: [&str; 14] = [
    "categories",
    "items",
    "actors",
    "films",
    "roles",
    "projects",
    "tasks",
    "task_details",
    "notes",
    "orders",
    "order_lines",
    "people",
    "friendships",
    "documents",
];

/// The twin's server: an SQLite file made from the PostgreSQL fixture's rows, served with
/// the default server's anonymous role and JWT secret.
pub fn base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = tempfile::tempdir().expect("temp dir").keep().join("twin.db");
        let sqlite = rusqlite::Connection::open(&path).expect("create the twin");
        sqlite.execute_batch(SCHEMA).expect("twin schema");
        let uri = super::harness().superuser_uri.clone();
        let rows: Vec<(String, String)> = super::block_on(async move {
            let client = rowgate::backend::postgres::connect_without_tls(&uri.parse().expect("uri"))
                .await
                .expect("connect");
            let mut rows = Vec::new();
            for table in TABLES {
                let sql = format!("SELECT coalesce(json_agg(t), '[]')::text FROM test.{table} t");
                let json: String = client.query_one(&sql, &[]).await.expect("fixture rows").get(0);
                rows.push((table.to_owned(), json));
            }
            rows
        });
        for (table, json) in rows {
            copy(&sqlite, &table, &json);
        }
        // The fixture's sequences: tasks start again at 101.
        sqlite.execute("UPDATE sqlite_sequence SET seq = 100 WHERE name = 'tasks'", []).expect("sequence");
        drop(sqlite);
        let rules = path.with_extension("rules.toml");
        std::fs::write(&rules, self::rules()).expect("rules");
        super::start_server(rowgate::config::ServeArgs {
            db_uri: Some(format!("sqlite:{}", path.display())),
            db_anon_role: Some("web_anon".into()),
            db_rules: Some(rules),
            server_host: Some("127.0.0.1".into()),
            jwt_secret: Some(super::JWT_SECRET.into()),
            db_tx_end: Some(rowgate::config::TxEnd::CommitAllowOverride),
            db_aggregates_enabled: Some(true),
            ..Default::default()
        })
    })
}

/// Inserts the rows of a JSON array (PostgreSQL's `json_agg`) into `table`: JSON columns take
/// the value's JSON text, the others its SQL value.
fn copy(sqlite: &rusqlite::Connection, table: &str, json: &str) {
    let mut info = sqlite.prepare("SELECT name, type FROM pragma_table_info(?1)").expect("columns");
    let columns: Vec<(String, String)> = info
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("columns")
        .map(Result::unwrap)
        .collect();
    let names: Vec<String> = columns.iter().map(|(c, _)| format!("\"{c}\"")).collect();
    let values: Vec<String> = columns
        .iter()
        .map(|(c, ty)| {
            let path = format!("'$.\"{c}\"'");
            if ty == "JSON" {
                format!("CASE json_type(value, {path}) WHEN 'null' THEN NULL ELSE value -> {path} END")
            } else {
                format!("value ->> {path}")
            }
        })
        .collect();
    let sql = format!(
        "INSERT INTO \"{table}\" ({}) SELECT {} FROM json_each(?1)",
        names.join(", "),
        values.join(", ")
    );
    sqlite.execute(&sql, [json]).unwrap_or_else(|e| panic!("copying {table}: {e}"));
}

thread_local! {
    /// The server this thread's requests go to, when not the default PostgreSQL one.
    static TARGET: RefCell<Option<&'static str>> = const { RefCell::new(None) };
}

/// Runs `test` with this thread's default requests sent to the SQLite twin.
pub fn on_sqlite(test: fn()) {
    let base = base();
    TARGET.with(|t| *t.borrow_mut() = Some(base));
    let result = std::panic::catch_unwind(test);
    TARGET.with(|t| *t.borrow_mut() = None);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Where this thread's default requests go: the twin inside [`on_sqlite`], else `default`.
pub fn target(default: &'static str) -> &'static str {
    TARGET.with(|t| t.borrow().unwrap_or(default))
}

/// A test of the default server's requests, run on PostgreSQL and on its SQLite twin.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn postgres() {
                    super::$name();
                }
                #[test]
                fn sqlite() {
                    $crate::support::twin::on_sqlite(super::$name);
                }
            }
        )*
    };
}
