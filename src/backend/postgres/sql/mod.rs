//! `Plan` → [`Statement`]s for PostgreSQL.
//!
//! Invariants: identifiers in the text come only from the plan (which took them from the
//! schema cache) and are always quoted; every value from the request — filter operands, JSON
//! keys — is a bound parameter, never part of the text; row counts (LIMIT, OFFSET) are numbers
//! the parser already checked, written as literals so PostgreSQL can plan for them. Type names
//! of casts are checked against the schema cache's list before they reach this stage.
//!
//! The SELECT list is shaped for rendering in rowgate: columns of types whose binary form
//! rowgate turns into JSON itself are selected as they are; every other value goes through
//! PostgreSQL's `to_json`, so it renders exactly as PostgREST renders it.

mod call;
mod filter;
mod read;
mod write;

pub use read::{render_read, ReadStatements, RowShape};
pub use write::{insert_children, insert_parent, render_write, WriteStatements};

use std::fmt::Write;

pub use crate::backend::{push_ident, Statement};

/// Appends `schema.name`, both quoted: a function or relation of the schema cache.
pub(crate) fn push_qualified(sql: &mut String, name: &crate::schema::QualifiedName) {
    push_ident(sql, &name.schema);
    sql.push('.');
    push_ident(sql, &name.name);
}
use crate::schema::ValueKind;

/// How the renderer turns one selected value into JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// Binary int2.
    Int2,
    /// Binary int4.
    Int4,
    /// Binary int8.
    Int8,
    /// Binary numeric.
    Numeric,
    /// Binary bool.
    Bool,
    /// Text, escaped into a JSON string.
    Text,
    /// Binary uuid.
    Uuid,
    /// Binary date.
    Date,
    /// Binary timestamp (without time zone).
    Timestamp,
    /// json text, copied as it is (also every `to_json` result).
    Json,
    /// Binary jsonb: a version byte, then the text.
    Jsonb,
}

impl Render {
    /// The rendering of a value kind, if rowgate renders it itself (otherwise `to_json`).
    pub fn native(kind: ValueKind) -> Option<Render> {
        Some(match kind {
            ValueKind::Int2 => Render::Int2,
            ValueKind::Int4 => Render::Int4,
            ValueKind::Int8 => Render::Int8,
            ValueKind::Numeric => Render::Numeric,
            ValueKind::Bool => Render::Bool,
            ValueKind::Text => Render::Text,
            ValueKind::Uuid => Render::Uuid,
            ValueKind::Date => Render::Date,
            ValueKind::Timestamp => Render::Timestamp,
            ValueKind::Json => Render::Json,
            ValueKind::Jsonb => Render::Jsonb,
            ValueKind::TsVector | ValueKind::Other => return None,
        })
    }
}

impl Render {
    /// Whether a result column of type `ty` holds what this rendering expects.
    pub fn accepts(self, ty: &tokio_postgres::types::Type) -> bool {
        use tokio_postgres::types::{Kind, Type};
        if let Kind::Domain(base) = ty.kind() {
            return self.accepts(base);
        }
        match self {
            Render::Int2 => *ty == Type::INT2,
            Render::Int4 => *ty == Type::INT4,
            Render::Int8 => *ty == Type::INT8,
            Render::Numeric => *ty == Type::NUMERIC,
            Render::Bool => *ty == Type::BOOL,
            Render::Text => {
                matches!(*ty, Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME)
                    || matches!(ty.kind(), Kind::Enum(_))
            }
            Render::Uuid => *ty == Type::UUID,
            Render::Date => *ty == Type::DATE,
            Render::Timestamp => *ty == Type::TIMESTAMP,
            Render::Json => *ty == Type::JSON,
            Render::Jsonb => *ty == Type::JSONB,
        }
    }
}

/// `EXPLAIN (FORMAT ..., options) <statement>`, with the statement's parameters.
pub fn explain(statement: &Statement, e: &crate::plan::Explain) -> Statement {
    let mut text = String::from(if e.json { "EXPLAIN (FORMAT JSON" } else { "EXPLAIN (FORMAT TEXT" });
    for option in &e.options {
        text.push_str(", ");
        // Options are checked words of a fixed list, never request text.
        text.push_str(&option.to_ascii_uppercase());
    }
    text.push_str(") ");
    text.push_str(&statement.text);
    Statement { text, params: statement.params.clone() }
}

/// Collects parameters while SQL text is written.
#[derive(Debug, Default)]
pub struct Params(pub Vec<String>);

impl Params {
    /// Adds a value and appends its placeholder to `sql`.
    pub fn push(&mut self, sql: &mut String, value: impl Into<String>) {
        self.0.push(value.into());
        let _ = write!(sql, "${}", self.0.len());
    }
}
