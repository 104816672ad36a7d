//! The schema cache of an SQLite file: its tables and views, their columns with declared types,
//! primary, unique and foreign keys, all under the one exposed schema name (`db-schemas`'
//! first, `public` by default), so that URLs and clients are the same as on PostgreSQL.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::Connection;

use crate::schema::{
    Column, ForeignKey, QualifiedName, Reads, Relation, RelationKind, SchemaCache, ValueKind, Writable,
};

/// Reads the schema of `conn` into a schema cache whose relations are in schema `exposed`.
pub fn load(conn: &Connection, exposed: &str) -> rusqlite::Result<SchemaCache> {
    let mut cache = SchemaCache::default();
    // A virtual table's shadow tables (an FTS5 index's storage) are its own business.
    let mut objects = conn.prepare(
        "SELECT s.name, s.type, coalesce(lower(s.sql) LIKE 'create virtual table%using fts5%', 0), \
         coalesce(t.wr, 0) \
         FROM sqlite_schema AS s LEFT JOIN pragma_table_list AS t ON t.schema = 'main' AND t.name = s.name \
         WHERE s.type IN ('table', 'view') AND coalesce(t.type, '') <> 'shadow' \
         AND s.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND s.name NOT LIKE '\\_rowgate\\_%' ESCAPE '\\' ORDER BY s.name",
    )?;
    let objects: Vec<(String, String, bool, bool)> = objects
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    let qualified = |name: &str| QualifiedName { schema: exposed.to_owned(), name: name.to_owned() };
    for (i, (name, kind, fts5, without_rowid)) in objects.iter().enumerate() {
        let mut pk: Vec<(i64, String)> = Vec::new();
        let mut columns = Vec::new();
        let mut info =
            conn.prepare("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1)")?;
        let mut rows = info.query([name])?;
        while let Some(r) = rows.next()? {
            let column: String = r.get(0)?;
            let declared: String = r.get::<_, Option<String>>(1)?.unwrap_or_default();
            let key_position: i64 = r.get(4)?;
            if key_position > 0 {
                pk.push((key_position, column.clone()));
            }
            columns.push(Column {
                name: column,
                // An FTS5 table's columns are what `fts` searches, as a tsvector's are.
                kind: if *fts5 { ValueKind::TsVector } else { value_kind(&declared) },
                type_name: declared.to_ascii_lowercase(),
                type_oid: 0,
                nullable: r.get::<_, i64>(2)? == 0,
                default: r.get(3)?,
                comment: None,
                data_type: data_type(&declared),
                max_length: max_length(&declared),
                enum_values: Vec::new(),
            });
        }
        // An `INTEGER PRIMARY KEY` is the rowid (unless the table has none): never null, and
        // NULL inserted is the next one.
        if let ([(_, key)], false) = (pk.as_slice(), *without_rowid) {
            if let Some(c) = columns.iter_mut().find(|c| c.name == *key && c.type_name == "integer") {
                c.nullable = false;
                c.default.get_or_insert_with(|| "NULL".to_owned());
            }
        }
        let table = kind == "table";
        let mut relation = Relation::new(
            qualified(name),
            if table { RelationKind::Table } else { RelationKind::View },
            columns,
        );
        relation.oid = u32::try_from(i + 1).unwrap_or(u32::MAX);
        pk.sort();
        relation.primary_key = pk.into_iter().map(|(_, c)| c).collect();
        // FTS5 tables are searched, not written through the API: virtual tables cannot return
        // the rowids written (write the content table; triggers keep the index).
        if table && !fts5 {
            relation.writable = Writable { insert: true, update: true, delete: true };
            relation.unique_keys = unique_keys(conn, name)?;
            relation.foreign_keys = foreign_keys(conn, name, &relation.primary_key, &qualified)?;
        }
        cache.relations.insert(relation.name.clone(), Arc::new(relation));
    }
    // A foreign key naming no columns refers to the target's primary key.
    let primary: HashMap<QualifiedName, Vec<String>> =
        cache.relations.iter().map(|(n, r)| (n.clone(), r.primary_key.clone())).collect();
    for relation in cache.relations.values_mut() {
        if relation.foreign_keys.iter().any(|fk| fk.target_columns.iter().any(String::is_empty)) {
            let r = Arc::make_mut(relation);
            for fk in &mut r.foreign_keys {
                if fk.target_columns.iter().any(String::is_empty) {
                    fk.target_columns = primary.get(&fk.target).cloned().unwrap_or_default();
                }
            }
            r.foreign_keys.retain(|fk| fk.target_columns.len() == fk.columns.len());
        }
    }
    // What the response cache invalidates an answer by: a table's own commits (rowgate's writer
    // reports each commit's tables); a view's by those of the tables its bytecode opens.
    let oids: HashMap<String, u32> = cache.relations.values().map(|r| (r.name.name.clone(), r.oid)).collect();
    let roots = root_pages(conn)?;
    for relation in cache.relations.values() {
        let reads = match relation.kind {
            RelationKind::View => view_reads(conn, &relation.name.name, &roots, &oids),
            _ => Reads::Tables(vec![relation.oid]),
        };
        cache.dependencies.relations.insert(relation.oid, reads);
    }
    cache.dependencies.all_tables_watched = true;
    cache.dependencies.writes_unreported = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'trigger' \
           OR (type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND lower(sql) LIKE '%without%rowid%'))",
        [],
        |r| r.get(0),
    )?;
    // The types a cast may name: those the SQLite dialect renders (sql::sqlite, `Expr::Cast`).
    cache.type_names = [
        "integer",
        "int",
        "int2",
        "int4",
        "int8",
        "smallint",
        "bigint",
        "text",
        "varchar",
        "character varying",
        "char",
        "character",
        "bpchar",
        "name",
        "citext",
        "real",
        "float",
        "float4",
        "float8",
        "double precision",
        "numeric",
        "decimal",
        "blob",
        "bool",
        "boolean",
        "json",
        "jsonb",
    ]
    .map(String::from)
    .into();
    Ok(cache)
}

/// The table each b-tree root page belongs to (a table's own, or one of its indexes').
fn root_pages(conn: &Connection) -> rusqlite::Result<HashMap<i64, String>> {
    let mut q = conn.prepare("SELECT rootpage, tbl_name FROM sqlite_schema WHERE rootpage > 0")?;
    let pages = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect();
    pages
}

/// The tables a view reads: those whose b-trees its bytecode opens (`EXPLAIN`'s `OpenRead`),
/// views within it included. Any table, when that cannot be told: a virtual table (`VOpen`),
/// another database, or a table the API does not serve.
fn view_reads(
    conn: &Connection,
    view: &str,
    roots: &HashMap<i64, String>,
    oids: &HashMap<String, u32>,
) -> Reads {
    let sql = format!("EXPLAIN SELECT * FROM \"{}\"", view.replace('"', "\"\""));
    let opcodes: Option<Vec<(String, i64, i64)>> = conn.prepare(&sql).ok().and_then(|mut q| {
        let rows = q.query_map([], |r| Ok((r.get(1)?, r.get(3)?, r.get(4)?))).ok()?;
        rows.collect::<Result<_, _>>().ok()
    });
    let Some(opcodes) = opcodes else { return Reads::AnyTable };
    let mut tables = Vec::new();
    for (opcode, page, database) in opcodes {
        match opcode.as_str() {
            "VOpen" => return Reads::AnyTable,
            "OpenRead" => {
                let oid = (database == 0).then(|| roots.get(&page)).flatten().and_then(|t| oids.get(t));
                match oid {
                    Some(oid) if !tables.contains(oid) => tables.push(*oid),
                    Some(_) => {}
                    None => return Reads::AnyTable,
                }
            }
            _ => {}
        }
    }
    Reads::Tables(tables)
}

/// The unique indexes' column lists (constraints and `CREATE UNIQUE INDEX` alike), besides the
/// primary key. A partial index is no key: it holds the columns unique in some rows only (and
/// PostgreSQL's catalog, which PostgREST reads, has no constraint for one either).
fn unique_keys(conn: &Connection, table: &str) -> rusqlite::Result<Vec<Vec<String>>> {
    let mut list = conn.prepare(
        "SELECT name FROM pragma_index_list(?1) WHERE \"unique\" AND origin <> 'pk' AND NOT partial",
    )?;
    let names: Vec<String> = list.query_map([table], |r| r.get(0))?.collect::<Result<_, _>>()?;
    let mut keys = Vec::new();
    for index in names {
        let mut info = conn.prepare("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")?;
        let columns: Vec<Option<String>> =
            info.query_map([&index], |r| r.get(0))?.collect::<Result<_, _>>()?;
        // An index on expressions has no column names for them: not a key of columns.
        if let Some(columns) = columns.into_iter().collect::<Option<Vec<String>>>() {
            keys.push(columns);
        }
    }
    Ok(keys)
}

fn foreign_keys(
    conn: &Connection,
    table: &str,
    _primary_key: &[String],
    qualified: &impl Fn(&str) -> QualifiedName,
) -> rusqlite::Result<Vec<ForeignKey>> {
    let mut list = conn.prepare(
        "SELECT id, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?1) ORDER BY id, seq",
    )?;
    let rows: Vec<(i64, String, String, Option<String>)> = list
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    let mut keys: Vec<ForeignKey> = Vec::new();
    let mut last = None;
    for (id, target, from, to) in rows {
        if last != Some(id) {
            // SQLite's constraints are unnamed: PostgreSQL's default name stands in, so that
            // `!hint` disambiguation reads the same.
            keys.push(ForeignKey {
                name: format!("{table}_{from}_fkey"),
                columns: Vec::new(),
                target: qualified(&target),
                target_columns: Vec::new(),
            });
            last = Some(id);
        }
        let fk = keys.last_mut().expect("pushed above");
        fk.columns.push(from);
        fk.target_columns.push(to.unwrap_or_default());
    }
    Ok(keys)
}

/// The value kind of a declared type, by SQLite's affinity rules with the common type names
/// PostgreSQL would render differently (booleans, JSON) recognised first.
pub fn value_kind(declared: &str) -> ValueKind {
    let t = declared.to_ascii_uppercase();
    if t.contains("BOOL") {
        ValueKind::Bool
    } else if t.contains("JSON") {
        ValueKind::Json
    } else if t.contains("INT") {
        ValueKind::Int8
    } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
        ValueKind::Text
    } else if t.contains("UUID") {
        ValueKind::Uuid
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        // PostgreSQL's float8: rendered without a fraction when it has none (sql::sqlite).
        ValueKind::Numeric
    } else {
        // NUMERIC, dates and no type at all: stored as given, rendered as stored.
        ValueKind::Other
    }
}

/// The PostgreSQL type a declared type stands for, as the OpenAPI description names it: the
/// common SQL names by their PostgreSQL spelling, a type SQLite reads by affinity alone by
/// that affinity (`INTEGER`, `TEXT`, `REAL`, `NUMERIC`), no type at all as `text`.
pub fn data_type(declared: &str) -> String {
    let t = declared.trim().to_ascii_lowercase();
    let base = t.split('(').next().unwrap_or("").trim();
    let known = match base {
        "" => "text",
        // SQLite's integers are 64-bit.
        "int" | "integer" | "mediumint" => "bigint",
        "tinyint" | "smallint" | "int2" => "smallint",
        "bigint" | "int8" | "unsigned big int" => "bigint",
        "bool" | "boolean" => "boolean",
        "real" | "float" | "double" | "double precision" | "float8" => "double precision",
        "numeric" | "decimal" => "numeric",
        "varchar" | "character varying" | "nvarchar" | "varying character" | "native character" => {
            "character varying"
        }
        "char" | "character" | "nchar" => "character",
        "text" | "clob" => "text",
        "date" => "date",
        "datetime" | "timestamp" => "timestamp without time zone",
        "timestamptz" => "timestamp with time zone",
        "time" => "time without time zone",
        "json" => "json",
        "jsonb" => "jsonb",
        "uuid" => "uuid",
        "blob" => "bytea",
        _ => match value_kind(&t) {
            ValueKind::Bool => "boolean",
            ValueKind::Json => "json",
            ValueKind::Int8 => "bigint",
            ValueKind::Text => "text",
            ValueKind::Uuid => "uuid",
            ValueKind::Numeric => "double precision",
            _ => "numeric",
        },
    };
    known.to_owned()
}

/// `VARCHAR(n)` and `CHAR(n)`'s `n`, which SQLite keeps but does not enforce.
fn max_length(declared: &str) -> Option<u32> {
    let t = declared.to_ascii_lowercase();
    if !t.contains("char") {
        return None;
    }
    let inside = t.split_once('(')?.1.split_once(')')?.0;
    inside.trim().parse().ok()
}
