//! Realtime on SQLite: the tables of `realtime-tables` publish their changes (with PocketBase's
//! API on, any other table with a subscriber too, as its collections are all realtime), reported by
//! temporary triggers on the writer's connection (every row before and after, cascades and
//! other triggers included) and handed over when their batch commits. Temporary triggers live
//! in that connection only: nothing is written into the file, and other processes' writes to
//! it are not seen.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::{Map, Number, Value};

use super::db::{RowCapture, SqliteDb};
use crate::config::Config;
use crate::realtime::{Change, Commit, Feed, Kind, Published, Realtime, Relation, Wanted};
use crate::schema::{QualifiedName, ValueKind};

/// The most columns a table's trigger can pass (SQLite's function argument limit, less two).
const MAX_COLUMNS: usize = 125;

/// Publishes `realtime-tables` and starts the feed.
pub fn start(db: &Arc<SqliteDb>, rt: &Arc<Realtime>, config: &Config) {
    let exposed = config.db.schemas[0].clone();
    let tables: HashSet<QualifiedName> = config
        .realtime
        .tables
        .iter()
        .map(|t| QualifiedName { schema: exposed.clone(), name: t.clone() })
        .collect();
    rt.set_published(Published::Tables(tables));
    db.capture(Arc::new(Capture {
        feed: rt.feed(),
        exposed,
        names: config.realtime.tables.clone(),
        every_table: config.pocketbase.enabled,
        state: Mutex::default(),
    }));
    rt.feed().ready();
}

/// The writer's changes to published tables, kept until their batch ends.
struct Capture {
    feed: Feed,
    exposed: String,
    names: Vec<String>,
    /// Any table with a subscriber reports its changes, not only `names`.
    every_table: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The file's `schema_version` the triggers were made for (`None`: to be made).
    version: Option<i64>,
    /// With `every_table`, the subscribed tables they were made for.
    wanted: Option<Arc<Wanted>>,
    /// Per table, its relation and columns' kinds as the triggers pass them.
    tables: HashMap<String, (Arc<Relation>, Vec<ValueKind>)>,
    /// The old row of an update, until its new row is reported.
    old: Option<Map<String, Value>>,
    changes: Vec<Change>,
}

impl Capture {
    /// (Re)creates the triggers of every published table from its columns now (and, with
    /// `every_table`, of every table with a subscriber: a table nobody listens to pays nothing
    /// for its writes).
    fn make_triggers(&self, conn: &Connection, state: &mut State) -> rusqlite::Result<()> {
        state.tables.clear();
        let mut sql = String::new();
        let made: Vec<String> = conn
            .prepare("SELECT name FROM temp.sqlite_master WHERE type = 'trigger' AND name LIKE 'rowgate\\_rt\\_%' ESCAPE '\\'")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for trigger in made {
            sql.push_str(&format!("DROP TRIGGER IF EXISTS temp.{};\n", ident(&trigger)));
        }
        let mut names = self.names.clone();
        if self.every_table {
            let mut q = conn.prepare(
                "SELECT name FROM sqlite_schema WHERE type = 'table'
                 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_rowgate\\_%' ESCAPE '\\'",
            )?;
            for name in q.query_map([], |r| r.get::<_, String>(0))? {
                let name = name?;
                if !names.contains(&name) && self.feed.wants(&self.exposed, &name) {
                    names.push(name);
                }
            }
        }
        for table in &names {
            let mut columns: Vec<(String, String, bool)> = Vec::new();
            let mut q = conn.prepare("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")?;
            let mut pk: Vec<(i64, String)> = Vec::new();
            let rows = q.query_map([table], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
            })?;
            for row in rows {
                let (name, declared, key) = row?;
                if key > 0 {
                    pk.push((key, name.clone()));
                }
                columns.push((name, declared, key > 0));
            }
            let kind: Option<String> = conn
                .query_row("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1", [table], |r| {
                    r.get(0)
                })
                .ok();
            let virtual_table = kind
                .as_deref()
                .is_some_and(|s| s.trim_start().to_ascii_uppercase().starts_with("CREATE VIRTUAL"));
            if columns.is_empty() || virtual_table || columns.len() > MAX_COLUMNS {
                if !columns.is_empty() {
                    tracing::warn!(table, "realtime: changes of this table cannot be captured (a virtual table, or over {MAX_COLUMNS} columns)");
                }
                continue;
            }
            pk.sort();
            let relation = Relation {
                name: QualifiedName { schema: self.exposed.clone(), name: table.clone() },
                columns: columns
                    .iter()
                    .map(|(n, d, _)| (n.clone(), type_name(super::introspect::value_kind(d), d)))
                    .collect(),
                key: pk.into_iter().map(|(_, n)| n).collect(),
            };
            let kinds = columns.iter().map(|(_, d, _)| super::introspect::value_kind(d)).collect();
            let args = |row: &str| {
                columns.iter().map(|(n, _, _)| format!("{row}.{}", ident(n))).collect::<Vec<_>>().join(", ")
            };
            let (t, lit) = (ident(table), literal(table));
            sql.push_str(&format!(
                "CREATE TEMP TRIGGER {} AFTER INSERT ON main.{t} BEGIN SELECT rowgate_change({lit}, 'I', {}); END;\n\
                 CREATE TEMP TRIGGER {} AFTER UPDATE ON main.{t} BEGIN SELECT rowgate_change({lit}, 'O', {}); SELECT rowgate_change({lit}, 'U', {}); END;\n\
                 CREATE TEMP TRIGGER {} AFTER DELETE ON main.{t} BEGIN SELECT rowgate_change({lit}, 'D', {}); END;\n",
                ident(&format!("rowgate_rt_i_{table}")),
                args("NEW"),
                ident(&format!("rowgate_rt_u_{table}")),
                args("OLD"),
                args("NEW"),
                ident(&format!("rowgate_rt_d_{table}")),
                args("OLD"),
            ));
            state.tables.insert(table.clone(), (Arc::new(relation), kinds));
        }
        conn.execute_batch(&sql)
    }
}

impl RowCapture for Capture {
    fn prepare(&self, conn: &Connection) {
        let Ok(version) = conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0)) else { return };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = self.every_table.then(|| self.feed.wanted_now());
        let same_wanted = match (&state.wanted, &wanted) {
            (Some(then), Some(now)) => Arc::ptr_eq(then, now),
            (then, now) => then.is_none() && now.is_none(),
        };
        if state.version == Some(version) && same_wanted {
            return;
        }
        match self.make_triggers(conn, &mut state) {
            Ok(()) => {
                state.version = Some(version);
                state.wanted = wanted;
            }
            Err(e) => {
                tracing::error!(error = %e, "realtime: the change triggers could not be made");
                state.tables.clear();
            }
        }
    }

    fn row(&self, table: &str, op: &str, values: &[ValueRef<'_>]) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some((relation, kinds)) = state.tables.get(table).cloned() else { return };
        if values.len() != kinds.len() || !self.feed.wants(&self.exposed, table) {
            state.old = None;
            return;
        }
        let row: Map<String, Value> = relation
            .columns
            .iter()
            .zip(values.iter().zip(&kinds))
            .map(|((n, _), (v, k))| (n.clone(), json(*v, *k)))
            .collect();
        let (kind, record, old_record) = match op {
            "I" => (Kind::Insert, row, Map::new()),
            "D" => (Kind::Delete, Map::new(), row),
            "O" => {
                state.old = Some(row);
                return;
            }
            "U" => (Kind::Update, row, state.old.take().unwrap_or_default()),
            _ => return,
        };
        state.changes.push(Change { relation, kind, record, old_record, error: None });
    }

    fn mark(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).changes.len()
    }

    fn rollback_to(&self, mark: usize) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).changes.truncate(mark);
    }

    fn end(&self, committed: bool) {
        let changes = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if !committed {
                // The triggers made in this batch, if any, were rolled back with it.
                state.version = None;
            }
            std::mem::take(&mut state.changes)
        };
        if committed && !changes.is_empty() {
            self.feed.commit(Commit { at: SystemTime::now(), changes });
        }
    }
}

/// `"name"`, quoted.
fn ident(name: &str) -> String {
    let mut s = String::new();
    crate::backend::push_ident(&mut s, name);
    s
}

/// `'text'`, quoted.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The type name a column's change carries: PostgreSQL's name for the kind rowgate reads the
/// column as (so clients' type conversions apply), else the declared type.
fn type_name(kind: ValueKind, declared: &str) -> String {
    match kind {
        ValueKind::Bool => "bool".into(),
        ValueKind::Json | ValueKind::Jsonb => "jsonb".into(),
        ValueKind::Int8 => "int8".into(),
        ValueKind::Text => "text".into(),
        ValueKind::Uuid => "uuid".into(),
        ValueKind::Numeric => "float8".into(),
        _ if declared.is_empty() => "text".into(),
        _ => declared.to_ascii_lowercase(),
    }
}

/// A stored value as the REST API renders it: booleans and JSON by the column's kind,
/// otherwise by what SQLite stored (a blob as PostgreSQL's `\x` hex).
fn json(v: ValueRef<'_>, kind: ValueKind) -> Value {
    match (v, kind) {
        (ValueRef::Null, _) => Value::Null,
        (ValueRef::Integer(i), ValueKind::Bool) => Value::Bool(i != 0),
        (ValueRef::Integer(i), _) => Value::from(i),
        (ValueRef::Real(f), _) if f.fract() == 0.0 && f.abs() < 1e15 => Value::from(f as i64),
        (ValueRef::Real(f), _) => {
            Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number)
        }
        (ValueRef::Text(t), ValueKind::Json | ValueKind::Jsonb) => serde_json::from_slice(t)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(t).into_owned())),
        (ValueRef::Text(t), _) => Value::String(String::from_utf8_lossy(t).into_owned()),
        (ValueRef::Blob(b), _) => Value::String(format!("\\x{}", crate::hex(b))),
    }
}
