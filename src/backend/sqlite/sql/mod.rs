//! The SQLite dialect: a read is one statement that returns the whole JSON body built by
//! SQLite's JSON functions (`json_object`, `json_group_array`, correlated subqueries for
//! embedded resources) with the number of rows in it, and a count statement for
//! `Prefer: count=...` (`read`); a write is the statement and the reads around it in one
//! transaction (`write`). Every table is read through the caller's access rules (`filter`
//! renders their conditions as it renders a request's). What SQLite cannot express is refused
//! with PostgREST's error shape, never answered differently.

mod filter;
mod fts5;
mod read;
mod write;

use crate::error::{code, Error};
use crate::plan::{Condition, EmbedPlan, Expr, OrderBy, OutputColumn, ReadPlan};

use filter::condition;

pub use read::{render_read, SqliteRead};
pub use write::{render_write, SqliteWrite};

/// The rows each table's access rule lets the caller read, by table name: `None` every row.
/// A table not named is never read: rendering it fails (a read path [`tables_of`] missed
/// must not fall back to every row).
pub type RowRules = std::collections::HashMap<String, Option<Condition>>;

/// What rendering carries along: positional parameters, `?1`, `?2`, ... (bound as text), and
/// the access rules' conditions, added wherever a table is read.
struct Ctx<'r> {
    values: Vec<String>,
    rules: &'r RowRules,
    /// Whether a full-text match may be rendered here: FTS5 answers `MATCH` only as a
    /// constraint on its table's scan, which a `NOT`, or an `OR` with anything but other
    /// matches beside it, keeps it from being.
    match_allowed: bool,
}

impl<'r> Ctx<'r> {
    fn new(rules: &'r RowRules) -> Self {
        Ctx { values: Vec::new(), rules, match_allowed: true }
    }

    fn push(&mut self, sql: &mut String, value: impl Into<String>) {
        self.values.push(value.into());
        sql.push('?');
        sql.push_str(itoa::Buffer::new().format(self.values.len()));
    }

    /// ` AND (<the rule's condition>)` for `table`, if its rule restricts the rows.
    fn rule(&mut self, table: &str, sql: &mut String) -> Rendered {
        match self.rules.get(table) {
            Some(Some(c)) => {
                sql.push_str(" AND ");
                condition(c, sql, self)
            }
            Some(None) => Ok(()),
            None => Err(Error::api(code::INTERNAL, format!("no read rule was looked up for {table}"))),
        }
    }
}

type Rendered = Result<(), Error>;

/// A condition alone, as SQL with its parameters (`?1`, `?2`, ...): an access rule applied to
/// a table rowgate queries itself (storage's rows).
pub fn render_condition(c: &Condition) -> Result<(String, Vec<String>), Error> {
    let rules = RowRules::new();
    let mut ctx = Ctx::new(&rules);
    let mut sql = String::new();
    condition(c, &mut sql, &mut ctx)?;
    Ok((sql, ctx.values))
}

fn unsupported(what: impl std::fmt::Display) -> Error {
    Error::api(code::UNSUPPORTED, format!("{what} is not supported on the SQLite backend"))
}

/// The tables and views a read plan reads: its relation, embedded and spread ones (with their
/// junction tables) and those its conditions and order read, in the order met.
pub fn tables(plan: &ReadPlan) -> Vec<&str> {
    tables_of(&plan.relation.name.name, &plan.columns, &plan.conditions, &plan.order)
}

/// The tables a relation's output columns, conditions and order read, the relation first.
pub fn tables_of<'p>(
    relation: &'p str,
    output: &'p [OutputColumn],
    filters: &'p [Condition],
    order: &'p [OrderBy],
) -> Vec<&'p str> {
    fn expr<'p>(e: &'p Expr, out: &mut Vec<&'p str>) {
        match e {
            Expr::Embed(e) => embed(e, out),
            Expr::Related { embed: e, expr: value, .. } => {
                embed(e, out);
                expr(value, out);
            }
            Expr::Cast(inner, _) | Expr::Represented { expr: inner, .. } => expr(inner, out),
            Expr::Aggregate(_, Some(inner)) => expr(inner, out),
            Expr::Column(_) | Expr::JsonPath { .. } | Expr::Computed { .. } | Expr::Aggregate(_, None) => {}
        }
    }
    fn conditions<'p>(conds: &'p [Condition], out: &mut Vec<&'p str>) {
        for c in conds {
            match c {
                Condition::Exists { embed: e, .. } => embed(e, out),
                Condition::Logic { children, .. } => conditions(children, out),
                Condition::Filter { expr: e, .. } => expr(e, out),
            }
        }
    }
    fn embed<'p>(e: &'p EmbedPlan, out: &mut Vec<&'p str>) {
        out.push(&e.relation.name.name);
        if let Some(j) = &e.through {
            out.push(&j.relation.name.name);
        }
        e.columns.iter().for_each(|c| expr(&c.expr, out));
        conditions(&e.conditions, out);
        e.order.iter().for_each(|o| expr(&o.expr, out));
    }
    let mut out = vec![relation];
    output.iter().for_each(|c| expr(&c.expr, &mut out));
    conditions(filters, &mut out);
    order.iter().for_each(|o| expr(&o.expr, &mut out));
    out
}
