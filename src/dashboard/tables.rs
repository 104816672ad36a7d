//! What the dashboard's table editor asks a backend to make: a table and its columns, each
//! named, typed from the backend's list and checked before any SQL is written (names are
//! quoted, defaults are literals or one of the named functions).

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

/// A column's default as SQL: the backend's `now` and `uuid` expressions, or a quoted literal.
pub fn default_sql(value: &str, now: &str, uuid: &str) -> String {
    match value {
        "now" => now.to_owned(),
        "uuid" => uuid.to_owned(),
        literal => format!("'{}'", literal.replace('\'', "''")),
    }
}

/// Checks a table or column name: what a URL and a filter can name plainly (letters, digits,
/// `_`; not starting with a digit, and not `_rowgate_`'s hidden tables), at most 63 bytes.
pub fn checked_name(name: &str, what: &str) -> Result<(), Error> {
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
pub fn checked_table(table: &NewTable, types: &[&str]) -> Result<(), Error> {
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
pub fn checked_column(column: &NewColumn, types: &[&str]) -> Result<(), Error> {
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
