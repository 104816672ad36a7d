//! The tables of SQLite's storage rows: the tables, their columns, rows to values, the rules as
//! SQL, and a statement builder that numbers parameters.

use std::sync::Arc;

use super::super::introspect;
use crate::schema::{Column, QualifiedName, Relation, RelationKind, SchemaCache};
use crate::storage::error::StorageError;
use crate::storage::store::{Bucket, ObjectRow};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_storage_buckets (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  owner TEXT,
  owner_id TEXT,
  public BOOLEAN NOT NULL DEFAULT 0,
  file_size_limit INTEGER,
  allowed_mime_types JSON,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS _rowgate_storage_objects (
  id TEXT PRIMARY KEY,
  bucket_id TEXT NOT NULL REFERENCES _rowgate_storage_buckets (id),
  name TEXT NOT NULL,
  owner TEXT,
  owner_id TEXT,
  version TEXT,
  metadata JSON,
  user_metadata JSON,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  last_accessed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  folder TEXT GENERATED ALWAYS AS (CASE WHEN instr(name, '/') > 0 THEN substr(name, 1, instr(name, '/') - 1) END) VIRTUAL,
  UNIQUE (bucket_id, name)
);
CREATE INDEX IF NOT EXISTS _rowgate_storage_objects_version ON _rowgate_storage_objects (version);";

pub(super) const BUCKETS: &str = "_rowgate_storage_buckets";
pub(super) const OBJECTS: &str = "_rowgate_storage_objects";
pub(super) const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
pub(super) const BUCKET_COLUMNS: &str =
    "id, name, owner, public, file_size_limit, allowed_mime_types, created_at, updated_at";
pub(super) const OBJECT_COLUMNS: &str =
    "o.id, o.bucket_id, o.name, o.owner, o.owner_id, o.version, o.metadata, o.user_metadata, o.created_at, \
     o.updated_at, o.last_accessed_at";

#[derive(Debug, Clone)]
pub(super) struct Rule {
    pub(super) sql: String,
    pub(super) values: Vec<String>,
}

impl Rule {
    pub(super) fn all() -> Rule {
        Rule { sql: "1".into(), values: Vec::new() }
    }
}

pub(super) fn column(name: &str, declared: &str) -> Column {
    Column {
        name: name.to_owned(),
        type_name: declared.to_ascii_lowercase(),
        type_oid: 0,
        kind: introspect::value_kind(declared),
        nullable: true,
        default: None,
        comment: None,
        data_type: introspect::data_type(declared),
        max_length: None,
        enum_values: Vec::new(),
    }
}

/// The tables as relations of schema `storage`, for planning the rules' filters.
pub(super) fn rules_schema() -> SchemaCache {
    let mut schema = SchemaCache::default();
    let text = ["id", "name", "owner", "owner_id", "created_at", "updated_at"];
    let mut buckets: Vec<Column> = text.iter().map(|c| column(c, "TEXT")).collect();
    buckets.extend([
        column("public", "BOOLEAN"),
        column("file_size_limit", "INTEGER"),
        column("allowed_mime_types", "JSON"),
    ]);
    let text = [
        "id",
        "bucket_id",
        "name",
        "owner",
        "owner_id",
        "version",
        "created_at",
        "updated_at",
        "last_accessed_at",
        "folder",
    ];
    let mut objects: Vec<Column> = text.iter().map(|c| column(c, "TEXT")).collect();
    objects.extend([column("metadata", "JSON"), column("user_metadata", "JSON")]);
    for (name, columns) in [("buckets", buckets), ("objects", objects)] {
        let q = QualifiedName { schema: "storage".into(), name: name.into() };
        let mut r = Relation::new(q.clone(), RelationKind::Table, columns);
        r.primary_key = vec!["id".into()];
        schema.relations.insert(q, Arc::new(r));
    }
    schema
}

/// The `sub` when it is a UUID (Supabase's `owner`).
pub(super) fn owner_uuid(sub: Option<&str>) -> Option<String> {
    let s = sub?;
    let shape = s.len() == 36
        && s.chars().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    shape.then(|| s.to_owned())
}

pub(super) fn failed(e: rusqlite::Error) -> StorageError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => StorageError::resource_exists(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            StorageError::unavailable()
        }
        Some(rusqlite::ErrorCode::OperationInterrupted) => StorageError::database_timeout(),
        Some(rusqlite::ErrorCode::DiskFull) => StorageError::disk_full(),
        _ => {
            tracing::error!(error = %e, "a storage statement failed");
            StorageError::internal("Internal Server Error")
        }
    }
}

pub(super) fn api_failed(e: crate::error::Error) -> StorageError {
    crate::storage::error::from_api(&e)
}

/// What a rule refusing a write says.
pub(super) fn refused() -> StorageError {
    StorageError::access_denied("new row violates row-level security policy")
}

pub(super) fn bucket(r: &rusqlite::Row<'_>) -> rusqlite::Result<Bucket> {
    let types: Option<String> = r.get(5)?;
    Ok(Bucket {
        id: r.get(0)?,
        name: r.get(1)?,
        owner: r.get(2)?,
        public: r.get(3)?,
        file_size_limit: r.get(4)?,
        allowed_mime_types: types.and_then(|t| serde_json::from_str(&t).ok()),
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

pub(super) fn object(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<ObjectRow> {
    Ok(ObjectRow {
        id: r.get(first)?,
        bucket_id: r.get(first + 1)?,
        name: r.get(first + 2)?,
        owner: r.get(first + 3)?,
        owner_id: r.get(first + 4)?,
        version: r.get(first + 5)?,
        metadata: r.get(first + 6)?,
        user_metadata: r.get(first + 7)?,
        created_at: r.get(first + 8)?,
        updated_at: r.get(first + 9)?,
        last_accessed_at: r.get(first + 10)?,
    })
}

/// SQL text whose parameters are the rule's first, then those pushed.
pub(super) struct Query {
    pub(super) sql: String,
    pub(super) values: Vec<String>,
}

impl Query {
    pub(super) fn new(sql: impl Into<String>) -> Query {
        Query { sql: sql.into(), values: Vec::new() }
    }

    /// Appends `text`, then a parameter.
    pub(super) fn bind(&mut self, text: &str, value: impl Into<String>) -> &mut Query {
        self.sql.push_str(text);
        self.values.push(value.into());
        self.sql.push('?');
        self.sql.push_str(&self.values.len().to_string());
        self
    }

    /// Appends text.
    pub(super) fn text(&mut self, text: &str) -> &mut Query {
        self.sql.push_str(text);
        self
    }

    /// Appends ` AND <rule>`, renumbering its parameters after those already bound.
    pub(super) fn rule(&mut self, rule: &Rule) -> &mut Query {
        let offset = self.values.len();
        let mut sql = rule.sql.clone();
        // Highest first, so that ?1 does not rewrite the start of ?12.
        for i in (1..=rule.values.len()).rev() {
            sql = sql.replace(&format!("?{i}"), &format!("?#{}", i + offset));
        }
        self.sql.push_str(" AND (");
        self.sql.push_str(&sql.replace("?#", "?"));
        self.sql.push(')');
        self.values.extend(rule.values.iter().cloned());
        self
    }

    pub(super) fn params(&self) -> rusqlite::ParamsFromIter<std::slice::Iter<'_, String>> {
        rusqlite::params_from_iter(self.values.iter())
    }
}

/// Whether the row `rowid` of `table` satisfies `rule`.
pub(super) fn holds(
    c: &rusqlite::Connection,
    table: &str,
    rowid: i64,
    rule: &Rule,
) -> Result<bool, StorageError> {
    let mut q = Query::new(format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE 1"));
    q.bind(" AND rowid = ", rowid.to_string()).rule(rule).text(")");
    c.query_row(&q.sql, q.params(), |r| r.get(0)).map_err(failed)
}
