//! PocketBase's collections in the SQLite file: each a table, and a row of
//! `_rowgate_collections` with its definition and its access, which the access rules take
//! over the rules file's entries for that table ([`super::rules::Rules::with_collections`]).

use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use super::db::{sqlite_error, SqliteDb};
use super::SqliteBackend;
use crate::backend::collections::{
    table_statements, CollectionChange, ColumnKind, TableAccess, TableChange, TableDialect,
};
use crate::backend::push_ident;
use crate::error::Error;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS _rowgate_collections (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    access TEXT NOT NULL,
    definition TEXT NOT NULL
)";

/// The stored definitions' texts, oldest first.
pub async fn definitions(db: &Arc<SqliteDb>) -> Result<Vec<String>, Error> {
    db.with_reader(|c| {
        if !exists(c)? {
            return Ok(Vec::new());
        }
        let mut q = c.prepare("SELECT definition FROM _rowgate_collections ORDER BY rowid")?;
        let texts = q.query_map([], |r| r.get(0))?.collect();
        texts
    })
    .await
}

/// Each collection's table and who may do what to its rows.
pub fn accesses(c: &Connection) -> rusqlite::Result<Vec<(String, TableAccess)>> {
    if !exists(c)? {
        return Ok(Vec::new());
    }
    let mut q = c.prepare("SELECT name, access FROM _rowgate_collections")?;
    let rows = q.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = Vec::new();
    for row in rows {
        let (name, access) = row?;
        // A row that does not read leaves its table to the rules file.
        if let Ok(access) = serde_json::from_str(&access) {
            out.push((name, access));
        }
    }
    Ok(out)
}

fn exists(c: &Connection) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_rowgate_collections'",
        [],
        |_| Ok(()),
    )
    .optional()
    .map(|found| found.is_some())
}

impl SqliteBackend {
    /// Makes `change` in one savepoint — the table's DDL and the stored definition — then
    /// puts the collections' access into the rules in force.
    pub async fn change_collection(&self, change: CollectionChange) -> Result<(), Error> {
        super::rules::check_access(&change.access).map_err(|e| {
            Error::api(crate::error::code::DASHBOARD_INVALID, format!("a rule that does not read: {e}"))
        })?;
        // Callers who differ in a claim the cache key leaves out would share cached answers.
        let probe =
            super::rules::Rules::default().with_collections(&[(change.table.clone(), change.access.clone())]);
        if let Some(missing) = super::unkeyed_claims(&self.config, &probe) {
            return Err(Error::api(
                crate::error::code::DASHBOARD_INVALID,
                format!("the rules read claims cache-key-claims leaves out: {missing}"),
            ));
        }
        self.db
            .run_admin(move |c| {
                c.execute_batch(SCHEMA).map_err(sqlite_error)?;
                c.execute_batch(&ddl(&change)).map_err(sqlite_error)?;
                if matches!(change.change, TableChange::Truncate) {
                    return Ok(());
                }
                match &change.definition {
                    Some(definition) => {
                        let access = serde_json::to_string(&change.access).map_err(|e| Error::internal(e.to_string()))?;
                        c.execute(
                            "INSERT INTO _rowgate_collections (id, name, access, definition) VALUES (?1, ?2, ?3, ?4) \
                             ON CONFLICT (id) DO UPDATE SET name = excluded.name, access = excluded.access, \
                             definition = excluded.definition",
                            params![change.id, change.table, access, definition],
                        )
                        .map_err(sqlite_error)?;
                    }
                    None => {
                        c.execute("DELETE FROM _rowgate_collections WHERE id = ?1", [&change.id])
                            .map_err(sqlite_error)?;
                    }
                }
                Ok(())
            })
            .await?;
        self.collections_changed().await
    }
}

/// The statements of `change`'s table.
fn ddl(change: &CollectionChange) -> String {
    table_statements(&Sqlite, change)
}

/// SQLite's way of writing a collection's table.
struct Sqlite;

impl TableDialect for Sqlite {
    fn push_table(&self, sql: &mut String, name: &str) {
        push_ident(sql, name);
    }

    /// As PocketBase declares its columns in SQLite.
    fn declaration(&self, kind: ColumnKind) -> &'static str {
        match kind {
            ColumnKind::Key => "TEXT PRIMARY KEY NOT NULL DEFAULT ('r' || lower(hex(randomblob(7))))",
            ColumnKind::Text => "TEXT NOT NULL DEFAULT ''",
            ColumnKind::Number => "REAL NOT NULL DEFAULT 0",
            ColumnKind::Bool => "BOOLEAN NOT NULL DEFAULT FALSE",
            ColumnKind::Json => "JSON DEFAULT NULL",
            ColumnKind::Point => "JSON NOT NULL DEFAULT '{\"lon\":0,\"lat\":0}'",
            ColumnKind::List => "JSON NOT NULL DEFAULT '[]'",
            ColumnKind::Reference => "TEXT DEFAULT NULL",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::collections::{Access, NewColumn, OnDelete};

    #[test]
    fn a_collection_is_made_as_pocketbase_declares_its_columns() {
        let everyone = TableAccess {
            select: Access::Everyone,
            insert: Access::Everyone,
            update: Access::Nobody,
            delete: Access::Nobody,
        };
        let change = CollectionChange {
            id: "pbc_1".into(),
            table: "posts".into(),
            change: TableChange::Create {
                columns: vec![
                    NewColumn { name: "id".into(), kind: ColumnKind::Key, references: None },
                    NewColumn { name: "title".into(), kind: ColumnKind::Text, references: None },
                    NewColumn {
                        name: "author".into(),
                        kind: ColumnKind::Reference,
                        references: Some(("authors".into(), OnDelete::Cascade)),
                    },
                ],
            },
            access: everyone,
            definition: None,
        };
        assert_eq!(
            ddl(&change),
            "CREATE TABLE \"posts\" (\"id\" TEXT PRIMARY KEY NOT NULL DEFAULT ('r' || lower(hex(randomblob(7)))), \
             \"title\" TEXT NOT NULL DEFAULT '', \"author\" TEXT DEFAULT NULL REFERENCES \"authors\" (\"id\") \
             ON DELETE CASCADE);"
        );
    }
}
