//! What the dashboard's table editor asks a backend to make — a table and its columns, each
//! named, typed from the backend's list and checked before any SQL is written — and the
//! statements that make it, written in the backend's [`Dialect`] (names quoted, defaults
//! literals or one of the named functions).

use serde::Deserialize;

use crate::error::Error;

/// A table to create.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTable {
    /// Its name, in the exposed schema.
    pub name: String,
    /// Its columns, at least one.
    pub columns: Vec<NewColumn>,
}

/// A column to create.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewColumn {
    /// Its name.
    pub name: String,
    /// One of the backend's [types](crate::dashboard::tables::NewColumn::kind).
    #[serde(rename = "type")]
    pub kind: String,
    /// Part of the primary key.
    #[serde(default)]
    pub primary_key: bool,
    /// `NOT NULL`.
    #[serde(default)]
    pub not_null: bool,
    /// `UNIQUE`.
    #[serde(default)]
    pub unique: bool,
    /// `now`, `uuid`, or a literal (written as a quoted SQL string the column's type converts).
    #[serde(default)]
    pub default: Option<String>,
}

/// How a backend writes the table editor's statements.
pub trait Dialect {
    /// The column types it offers.
    fn types(&self) -> &[&str];
    /// Appends a name, quoted.
    fn push_ident(&self, sql: &mut String, name: &str);
    /// Appends a table's name (in the exposed schema, where the backend has schemas).
    fn push_table(&self, sql: &mut String, name: &str);
    /// Appends a column type of [`Dialect::types`].
    fn push_type(&self, sql: &mut String, kind: &str);
    /// The expressions of the `now` and `uuid` defaults.
    fn now_and_uuid(&self) -> (&str, &str);
    /// Whether a lone key column is declared with its column (SQLite: an integer one is then
    /// the rowid, which numbers new rows itself).
    fn key_with_column(&self) -> bool;
}

/// `CREATE TABLE` for `table`, checked first.
pub fn create_table(d: &dyn Dialect, table: &NewTable) -> Result<String, Error> {
    checked_table(table, d.types())?;
    let keys: Vec<&NewColumn> = table.columns.iter().filter(|c| c.primary_key).collect();
    let inline = keys.len() == 1 && d.key_with_column();
    let mut sql = String::from("CREATE TABLE ");
    d.push_table(&mut sql, &table.name);
    sql.push_str(" (");
    for (i, column) in table.columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        push_column(d, &mut sql, column);
        if inline && column.primary_key {
            sql.push_str(" PRIMARY KEY");
        }
    }
    if !keys.is_empty() && !inline {
        sql.push_str(", PRIMARY KEY (");
        for (i, key) in keys.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            d.push_ident(&mut sql, &key.name);
        }
        sql.push(')');
    }
    sql.push(')');
    Ok(sql)
}

/// `ALTER TABLE ... ADD COLUMN`, checked first.
pub fn add_column(d: &dyn Dialect, table: &str, column: &NewColumn) -> Result<String, Error> {
    checked_name(table, "table")?;
    checked_column(column, d.types())?;
    let mut sql = String::from("ALTER TABLE ");
    d.push_table(&mut sql, table);
    sql.push_str(" ADD COLUMN ");
    push_column(d, &mut sql, column);
    Ok(sql)
}

/// `DROP TABLE`, or with `column` `ALTER TABLE ... DROP COLUMN`, checked first.
pub fn drop(d: &dyn Dialect, table: &str, column: Option<&str>) -> Result<String, Error> {
    checked_name(table, "table")?;
    let mut sql = String::new();
    match column {
        None => {
            sql.push_str("DROP TABLE ");
            d.push_table(&mut sql, table);
        }
        Some(column) => {
            checked_name(column, "column")?;
            sql.push_str("ALTER TABLE ");
            d.push_table(&mut sql, table);
            sql.push_str(" DROP COLUMN ");
            d.push_ident(&mut sql, column);
        }
    }
    Ok(sql)
}

fn push_column(d: &dyn Dialect, sql: &mut String, column: &NewColumn) {
    d.push_ident(sql, &column.name);
    sql.push(' ');
    d.push_type(sql, &column.kind);
    if column.not_null {
        sql.push_str(" NOT NULL");
    }
    if column.unique {
        sql.push_str(" UNIQUE");
    }
    if let Some(value) = &column.default {
        let (now, uuid) = d.now_and_uuid();
        sql.push_str(" DEFAULT ");
        match value.as_str() {
            "now" => sql.push_str(now),
            "uuid" => sql.push_str(uuid),
            literal => {
                sql.push('\'');
                sql.push_str(&literal.replace('\'', "''"));
                sql.push('\'');
            }
        }
    }
}

/// Checks a table or column name: what a URL and a filter can name plainly (letters, digits,
/// `_`; not starting with a digit, and not `_rowgate_`'s hidden tables), at most 63 bytes.
fn checked_name(name: &str, what: &str) -> Result<(), Error> {
    let plain = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("_rowgate");
    match plain {
        true => Ok(()),
        false => Err(invalid(format!(
            "{what} name {name:?}: use letters, digits and _ (not first a digit), at most 63 of them"
        ))),
    }
}

/// Checks a new table: its name, its columns' names (no two alike), their types (`types`).
fn checked_table(table: &NewTable, types: &[&str]) -> Result<(), Error> {
    checked_name(&table.name, "table")?;
    if table.columns.is_empty() {
        return Err(invalid("a table needs at least one column".into()));
    }
    let mut seen = std::collections::HashSet::new();
    for column in &table.columns {
        checked_column(column, types)?;
        if !seen.insert(column.name.to_ascii_lowercase()) {
            return Err(invalid(format!("column {:?} is named twice", column.name)));
        }
    }
    Ok(())
}

/// Checks a column's name and type.
fn checked_column(column: &NewColumn, types: &[&str]) -> Result<(), Error> {
    checked_name(&column.name, "column")?;
    if !types.contains(&column.kind.as_str()) {
        return Err(invalid(format!("type {:?}: one of {}", column.kind, types.join(", "))));
    }
    if column.default.as_deref().is_some_and(|d| d.contains('\0')) {
        return Err(invalid("a default cannot hold a NUL character".into()));
    }
    Ok(())
}

fn invalid(message: String) -> Error {
    Error::api(crate::error::code::DASHBOARD_INVALID, message)
}
