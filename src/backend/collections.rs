//! PocketBase's collections, on either backend: each is a real table of the exposed schema
//! and a stored definition (PocketBase's JSON, kept beside it: SQLite's `_rowgate_collections`,
//! PostgreSQL's `rowgate.pocketbase_collections`), changed together in one transaction. Who may
//! do what to a collection's rows is its [`TableAccess`], which each backend enforces on every
//! door: SQLite's access rules, PostgreSQL's row-level security policies. What crosses this
//! seam is data — columns, access, the definition's text — and each backend writes its own SQL.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{postgres, sqlite, Backend};
use crate::config::Config;
use crate::error::Error;
use crate::schema::SharedSchema;

/// What a column holds, as PocketBase's field types are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// The record id: text, the primary key, made when not given.
    Key,
    /// Text, `''` when not set.
    Text,
    /// A number, 0 when not set.
    Number,
    /// A boolean, false when not set.
    Bool,
    /// JSON, null when not set.
    Json,
    /// A geographic point as JSON, `{"lon":0,"lat":0}` when not set.
    Point,
    /// A JSON array (a multiple select, file or relation field), `[]` when not set.
    List,
    /// Another collection's record id, null for none.
    Reference,
}

/// What becomes of a row whose related record is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDelete {
    /// The relation is emptied.
    SetNull,
    /// The row is deleted too (PocketBase's `cascadeDelete`).
    Cascade,
    /// The related record cannot be deleted (a required relation).
    Restrict,
}

/// A column of a collection's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewColumn {
    /// Its name (checked by the caller: letters, digits and `_`).
    pub name: String,
    /// What it holds.
    pub kind: ColumnKind,
    /// For a relation: the related collection's table, and what a delete there does.
    pub references: Option<(String, OnDelete)>,
}

/// Who may take an action on a collection's rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// The superusers only (the service role).
    Nobody,
    /// Every caller, signed in or not.
    Everyone,
    /// The rows a condition holds for, one for visitors and one for signed-in callers (`None`:
    /// none for them), each in the access rules' language (docs/sqlite.md#access-rules):
    /// `"true"` for every row, else PostgREST filters on the table's own columns where
    /// `@jwt.<claim>` stands for the caller's claim.
    Rows {
        /// For visitors.
        visitor: Option<String>,
        /// For signed-in callers.
        signed_in: Option<String>,
    },
}

/// Who may read, create, update and delete a collection's rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableAccess {
    /// Reading.
    pub select: Access,
    /// Creating.
    pub insert: Access,
    /// Updating.
    pub update: Access,
    /// Deleting.
    pub delete: Access,
}

impl TableAccess {
    /// The superusers' alone.
    pub const NOBODY: TableAccess = TableAccess {
        select: Access::Nobody,
        insert: Access::Nobody,
        update: Access::Nobody,
        delete: Access::Nobody,
    };
}

/// What a change does to a collection's table.
#[derive(Debug, Clone)]
pub enum TableChange {
    /// Creates it.
    Create {
        /// Its columns, the key first.
        columns: Vec<NewColumn>,
    },
    /// Changes it.
    Alter {
        /// Its name before (`CollectionChange::table` is its name after).
        from: String,
        /// Columns renamed, old name to new.
        renamed: Vec<(String, String)>,
        /// Columns dropped.
        dropped: Vec<String>,
        /// Columns added.
        added: Vec<NewColumn>,
    },
    /// Drops it.
    Drop,
    /// Deletes all of its rows.
    Truncate,
}

/// One change to a collection, made in one transaction.
#[derive(Debug, Clone)]
pub struct CollectionChange {
    /// The collection's id, which its definition is stored by.
    pub id: String,
    /// Its table's name (after the change).
    pub table: String,
    /// What the change does to the table.
    pub change: TableChange,
    /// Who may do what to its rows after it (unused for a drop or truncate).
    pub access: TableAccess,
    /// Its definition's text after the change; `None` to remove it (or, for a truncate, to
    /// leave it as it is).
    pub definition: Option<String>,
}

/// How a backend writes a collection's table: its name (qualified where the backend has
/// schemas) and a column's declaration.
pub trait TableDialect {
    /// Appends the table `name`.
    fn push_table(&self, sql: &mut String, name: &str);
    /// A column's type, constraints and default for what it holds.
    fn declaration(&self, kind: ColumnKind) -> &'static str;
}

/// Appends `column`'s declaration: its name, what `d` declares for its kind, and a relation's
/// foreign key to the related collection's `id`.
fn push_column(d: &dyn TableDialect, sql: &mut String, column: &NewColumn) {
    super::push_ident(sql, &column.name);
    sql.push(' ');
    sql.push_str(d.declaration(column.kind));
    if let Some((target, on_delete)) = &column.references {
        sql.push_str(" REFERENCES ");
        d.push_table(sql, target);
        sql.push_str(" (\"id\") ON DELETE ");
        sql.push_str(match on_delete {
            OnDelete::SetNull => "SET NULL",
            OnDelete::Cascade => "CASCADE",
            OnDelete::Restrict => "RESTRICT",
        });
    }
}

/// The statements that make `change` to its table, names quoted (its access is each backend's
/// own to write).
pub fn table_statements(d: &dyn TableDialect, change: &CollectionChange) -> String {
    let mut sql = String::new();
    let table = &change.table;
    let statement = |sql: &mut String, head: &str, name: &str| {
        sql.push_str(head);
        d.push_table(sql, name);
        sql.push(' ');
    };
    match &change.change {
        TableChange::Create { columns } => {
            statement(&mut sql, "CREATE TABLE ", table);
            sql.push('(');
            for (i, column) in columns.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                push_column(d, &mut sql, column);
            }
            sql.push_str(");");
        }
        TableChange::Alter { from, renamed, dropped, added } => {
            if from != table {
                statement(&mut sql, "ALTER TABLE ", from);
                sql.push_str("RENAME TO ");
                super::push_ident(&mut sql, table);
                sql.push(';');
            }
            for (old, new) in renamed {
                statement(&mut sql, "ALTER TABLE ", table);
                sql.push_str("RENAME COLUMN ");
                super::push_ident(&mut sql, old);
                sql.push_str(" TO ");
                super::push_ident(&mut sql, new);
                sql.push(';');
            }
            for column in dropped {
                statement(&mut sql, "ALTER TABLE ", table);
                sql.push_str("DROP COLUMN ");
                super::push_ident(&mut sql, column);
                sql.push(';');
            }
            for column in added {
                statement(&mut sql, "ALTER TABLE ", table);
                sql.push_str("ADD COLUMN ");
                push_column(d, &mut sql, column);
                sql.push(';');
            }
        }
        TableChange::Drop => {
            statement(&mut sql, "DROP TABLE ", table);
            sql.push(';');
        }
        TableChange::Truncate => {
            statement(&mut sql, "DELETE FROM ", table);
            sql.push(';');
        }
    }
    sql
}

/// The collections' way into the database.
pub struct CollectionsDb {
    backend: Arc<Backend>,
    schema: Arc<SharedSchema>,
    exposed: String,
    /// PostgreSQL's connection for collections' DDL (`dashboard-db-uri`, else `db-uri`): the
    /// request pool's role usually may not create tables.
    ddl: Option<postgres::dashboard::ConsoleConnection>,
    /// One change at a time (PostgreSQL's DDL connection is one session).
    turn: tokio::sync::Mutex<()>,
    /// The role visitors' requests run as (`db-anon-role`), whom a visitor's policy is for.
    anon_role: Option<String>,
}

impl CollectionsDb {
    /// The collections of `backend`'s exposed schema.
    pub fn open(
        backend: Arc<Backend>,
        schema: Arc<SharedSchema>,
        config: &Config,
    ) -> Result<CollectionsDb, String> {
        let ddl = match &*backend {
            Backend::Postgres(_) => {
                let uri = config.dashboard.db_uri.as_deref().unwrap_or(&config.db.uri);
                let target = postgres::PgTarget::parse(uri).map_err(|e| e.to_string())?;
                Some(postgres::dashboard::ConsoleConnection::new(target))
            }
            Backend::Sqlite(_) => None,
        };
        let exposed = config.db.schemas[0].clone();
        let anon_role = config.db.anon_role.clone();
        Ok(CollectionsDb { backend, schema, exposed, ddl, turn: Default::default(), anon_role })
    }

    /// The stored definitions' texts.
    pub async fn definitions(&self) -> Result<Vec<String>, Error> {
        match (&*self.backend, &self.ddl) {
            (Backend::Sqlite(lite), _) => sqlite::collections::definitions(&lite.db).await,
            (_, Some(c)) => postgres::collections::definitions(&*c.client().await?, &self.exposed).await,
            _ => Err(Error::internal("no DDL connection")),
        }
    }

    /// Makes `change`, then waits until the schema cache shows it.
    pub async fn apply(&self, change: CollectionChange) -> Result<(), Error> {
        let _turn = self.turn.lock().await;
        let (table, kind) = (change.table.clone(), change.change.clone());
        match (&*self.backend, &self.ddl) {
            (Backend::Sqlite(lite), _) => lite.change_collection(change).await?,
            (_, Some(c)) => {
                let (client, visitor) = (c.client().await?, self.anon_role.as_deref());
                postgres::collections::apply(&client, &self.exposed, visitor, change).await?
            }
            _ => return Err(Error::internal("no DDL connection")),
        }
        if matches!(kind, TableChange::Truncate) {
            return Ok(());
        }
        let exposed = self.exposed.clone();
        let shows = move |s: &crate::schema::SchemaCache| match &kind {
            TableChange::Drop => s.relation(&exposed, &table).is_none(),
            TableChange::Alter { from, added, dropped, .. } => {
                s.relation(&exposed, &table).is_some_and(|r| {
                    added.iter().all(|a| r.columns.iter().any(|c| c.name == a.name))
                        && dropped.iter().all(|d| r.columns.iter().all(|c| &c.name != d))
                }) && (from == &table || s.relation(&exposed, from).is_none())
            }
            _ => s.relation(&exposed, &table).is_some(),
        };
        super::schema_shows(&self.backend, &self.schema, shows).await
    }
}
