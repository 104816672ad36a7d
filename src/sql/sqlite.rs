//! The SQLite dialect of a read: one statement that returns the whole JSON body built by
//! SQLite's JSON functions (`json_object`, `json_group_array`, correlated subqueries for
//! embedded resources) with the number of rows in it, and a count statement for
//! `Prefer: count=...`. What SQLite cannot express is refused with PostgREST's error shape,
//! never answered differently.

use http::StatusCode;
use rowgate_request::{CompareOp, Direction, IsValue, JsonKey, LogicOp, NullsOrder, Operation, Quantifier};

use super::{push_ident, Statement};
use crate::error::{code, Error};
use crate::plan::{Condition, EmbedPlan, Expr, Media, OrderBy, OutputColumn, ReadPlan, RowWindow};
use crate::schema::ValueKind;

/// The statements of a read on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteRead {
    /// Returns one row: the body (a JSON array) and its number of rows.
    pub main: Statement,
    /// Returns one row: the number of rows the filters match, when counted.
    pub count: Option<Statement>,
}

/// The rows each table's access rule lets the caller read, by table name; a table not named
/// is read whole.
pub type RowRules = std::collections::HashMap<String, Condition>;

/// What rendering carries along: positional parameters, `?1`, `?2`, ... (bound as text), and
/// the access rules' conditions, added wherever a table is read.
struct Ctx<'r> {
    values: Vec<String>,
    rules: &'r RowRules,
}

impl<'r> Ctx<'r> {
    fn new(rules: &'r RowRules) -> Self {
        Ctx { values: Vec::new(), rules }
    }

    fn push(&mut self, sql: &mut String, value: impl Into<String>) {
        self.values.push(value.into());
        sql.push('?');
        sql.push_str(itoa::Buffer::new().format(self.values.len()));
    }

    /// ` AND (<the rule's condition>)` for `table`, if its rule restricts the rows.
    fn rule(&mut self, table: &str, sql: &mut String) -> Rendered {
        if let Some(c) = self.rules.get(table) {
            sql.push_str(" AND ");
            condition(c, sql, self)?;
        }
        Ok(())
    }
}

type Rendered = Result<(), Error>;

fn unsupported(what: impl std::fmt::Display) -> Error {
    Error::api(
        StatusCode::BAD_REQUEST,
        code::NOT_IMPLEMENTED,
        format!("{what} is not supported on the SQLite backend"),
    )
}

/// Renders a read plan for SQLite, every table restricted to the rows `rules` allow.
pub fn render_read(plan: &ReadPlan, rules: &RowRules) -> Result<SqliteRead, Error> {
    if plan.call.is_some() {
        return Err(unsupported("Calling a function (/rpc)"));
    }
    if !matches!(plan.media, Media::Json { strip_nulls: false } | Media::Single { strip_nulls: false }) {
        return Err(unsupported(format!("The media type {}", plan.media.content_type())));
    }
    let mut params = Ctx::new(rules);
    let mut sql = String::with_capacity(256);
    sql.push_str("SELECT coalesce(json_group_array(json(pgrst_row)), '[]'), count(*) FROM (SELECT ");
    object(&plan.columns, &mut sql, &mut params)?;
    sql.push_str(" AS pgrst_row");
    source(&plan.relation.name.name, 0, &mut sql);
    where_clause(&plan.relation.name.name, &plan.conditions, &mut sql, &mut params)?;
    order_by(&plan.order, &mut sql, &mut params)?;
    window(plan.window, &mut sql);
    sql.push(')');
    let count = match plan.count {
        // SQLite has no planner estimate: every count is exact.
        Some(_) => {
            let mut params = Ctx::new(rules);
            let mut sql = String::from("SELECT count(*)");
            source(&plan.relation.name.name, 0, &mut sql);
            where_clause(&plan.relation.name.name, &plan.conditions, &mut sql, &mut params)?;
            Some(Statement { text: sql, params: params.values })
        }
        None => None,
    };
    Ok(SqliteRead { main: Statement { text: sql, params: params.values }, count })
}

/// The tables and views a read plan reads: its relation, embedded ones (with their junction
/// tables) and those its `EXISTS` conditions read, in the order met.
pub fn tables(plan: &ReadPlan) -> Vec<&str> {
    fn columns<'p>(cols: &'p [OutputColumn], out: &mut Vec<&'p str>) {
        for c in cols {
            if let Expr::Embed(e) = &c.expr {
                embed(e, out);
            }
        }
    }
    fn conditions<'p>(conds: &'p [Condition], out: &mut Vec<&'p str>) {
        for c in conds {
            match c {
                Condition::Exists { embed: e, .. } => embed(e, out),
                Condition::Logic { children, .. } => conditions(children, out),
                Condition::Filter { .. } => {}
            }
        }
    }
    fn embed<'p>(e: &'p EmbedPlan, out: &mut Vec<&'p str>) {
        out.push(&e.relation.name.name);
        if let Some(j) = &e.through {
            out.push(&j.relation.name.name);
        }
        columns(&e.columns, out);
        conditions(&e.conditions, out);
    }
    let mut out = vec![plan.relation.name.name.as_str()];
    columns(&plan.columns, &mut out);
    conditions(&plan.conditions, &mut out);
    out
}

/// ` FROM "name" AS pgrst_<depth>`.
fn source(name: &str, depth: usize, sql: &mut String) {
    sql.push_str(" FROM ");
    push_ident(sql, name);
    sql.push_str(" AS pgrst_");
    sql.push_str(itoa::Buffer::new().format(depth));
}

/// `json_object(key, value, ...)` of the output columns; keys are parameters (they may be
/// aliases from the request).
fn object(columns: &[OutputColumn], sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    sql.push_str("json_object(");
    for (i, col) in columns.iter().filter(|c| c.is_output()).enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        params.push(sql, col.key.clone());
        sql.push_str(", ");
        value(col, sql, params)?;
    }
    sql.push(')');
    Ok(())
}

/// A value as PostgREST renders its PostgreSQL counterpart: booleans as `true`/`false` (SQLite
/// stores 0 and 1), JSON columns and embeds as JSON, everything else as stored.
fn value(col: &OutputColumn, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    match (&col.expr, col.kind) {
        (Expr::Embed(_), _)
        | (Expr::JsonPath { .. }, ValueKind::Json | ValueKind::Jsonb)
        | (_, ValueKind::Json) => {
            sql.push_str("json(");
            expr(&col.expr, sql, params)?;
            sql.push(')');
        }
        (_, ValueKind::Bool) => {
            sql.push_str("json(CASE WHEN ");
            expr(&col.expr, sql, params)?;
            sql.push_str(" IS NULL THEN 'null' WHEN ");
            expr(&col.expr, sql, params)?;
            sql.push_str(" THEN 'true' ELSE 'false' END)");
        }
        _ => expr(&col.expr, sql, params)?,
    }
    Ok(())
}

fn expr(e: &Expr, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    match e {
        Expr::Column(name) => push_ident(sql, name),
        Expr::JsonPath { column, steps, .. } => {
            // SQLite's -> follows PostgreSQL's: a text key is an object label, an integer an
            // array index. Its ->> returns SQL values (2, not '2'; 1, not 'true'), where
            // PostgreSQL's returns the text: that is the JSON text of the value, unquoted
            // when it is a string.
            let path = |sql: &mut String, params: &mut Ctx<'_>| {
                push_ident(sql, column);
                for step in steps {
                    sql.push_str(" -> ");
                    match &step.key {
                        JsonKey::Key(k) => params.push(sql, k.clone()),
                        JsonKey::Index(i) => sql.push_str(&i.to_string()),
                    }
                }
            };
            if steps.last().is_some_and(|s| s.as_text) {
                sql.push_str("CASE json_type(");
                path(sql, params);
                sql.push_str(") WHEN 'text' THEN (");
                path(sql, params);
                // (`|| ''` makes the JSON text plain text, no longer JSON to json_object.)
                sql.push_str(") ->> '$' WHEN 'null' THEN NULL ELSE (");
                path(sql, params);
                sql.push_str(") || '' END");
            } else {
                path(sql, params);
            }
        }
        Expr::Embed(embed) => embedded(embed, sql, params)?,
        Expr::Cast(..) => return Err(unsupported("A cast (::type)")),
        Expr::Aggregate(..) => return Err(unsupported("An aggregate function")),
        Expr::Computed { .. } | Expr::Related { .. } => {
            return Err(unsupported("A computed field or relationship"))
        }
    }
    Ok(())
}

/// An embedded resource as a correlated subquery: a JSON array for to-many (`[]` when empty),
/// an object or null for to-one.
fn embedded(embed: &EmbedPlan, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    if embed.computed.is_some() {
        return Err(unsupported("A computed relationship"));
    }
    if embed.to_many {
        sql.push_str("(SELECT coalesce(json_group_array(json(pgrst_row)), '[]') FROM (SELECT ");
        object(&embed.columns, sql, params)?;
        sql.push_str(" AS pgrst_row");
        related_rows(embed, sql, params)?;
        order_by(&embed.order, sql, params)?;
        window(embed.window, sql);
        sql.push_str("))");
    } else {
        sql.push_str("(SELECT ");
        object(&embed.columns, sql, params)?;
        related_rows(embed, sql, params)?;
        sql.push_str(" LIMIT 1)");
    }
    Ok(())
}

/// ` FROM <embedded relation> WHERE <join to the parent> AND <its conditions>`.
fn related_rows(embed: &EmbedPlan, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    let alias = format!("pgrst_{}", embed.depth);
    let parent = format!("pgrst_{}", embed.depth - 1);
    source(&embed.relation.name.name, embed.depth, sql);
    let pair = |sql: &mut String, left: &str, left_col: &str, right: &str, right_col: &str| {
        sql.push_str(left);
        sql.push('.');
        push_ident(sql, left_col);
        sql.push_str(" = ");
        sql.push_str(right);
        sql.push('.');
        push_ident(sql, right_col);
    };
    sql.push_str(" WHERE 1");
    match &embed.through {
        None => {
            for (parent_col, child_col) in &embed.join {
                sql.push_str(" AND ");
                pair(sql, &alias, child_col, &parent, parent_col);
            }
        }
        Some(junction) => {
            let j = format!("{alias}_j");
            sql.push_str(" AND EXISTS (SELECT 1 FROM ");
            push_ident(sql, &junction.relation.name.name);
            sql.push_str(" AS ");
            sql.push_str(&j);
            sql.push_str(" WHERE 1");
            for (j_col, child_col) in &junction.to_child {
                sql.push_str(" AND ");
                pair(sql, &j, j_col, &alias, child_col);
            }
            for (parent_col, j_col) in &embed.join {
                sql.push_str(" AND ");
                pair(sql, &j, j_col, &parent, parent_col);
            }
            // (Unqualified names resolve to the innermost table: the junction's.)
            params.rule(&junction.relation.name.name, sql)?;
            sql.push(')');
        }
    }
    for c in &embed.conditions {
        sql.push_str(" AND ");
        condition(c, sql, params)?;
    }
    params.rule(&embed.relation.name.name, sql)
}

/// ` WHERE 1 AND <conditions> AND <the table's rule>`.
fn where_clause(table: &str, conditions: &[Condition], sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    sql.push_str(" WHERE 1");
    for c in conditions {
        sql.push_str(" AND ");
        condition(c, sql, params)?;
    }
    params.rule(table, sql)
}

fn condition(c: &Condition, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    match c {
        Condition::Filter { expr: e, kind, filter } => {
            if filter.negated {
                sql.push_str("NOT ");
            }
            sql.push('(');
            operation(e, *kind, &filter.operation, sql, params)?;
            sql.push(')');
        }
        Condition::Exists { embed, negated } => {
            sql.push_str(if *negated { "NOT EXISTS (SELECT 1" } else { "EXISTS (SELECT 1" });
            related_rows(embed, sql, params)?;
            sql.push(')');
        }
        Condition::Logic { negated, op, children } => {
            if *negated {
                sql.push_str("NOT ");
            }
            if children.is_empty() {
                // An empty AND holds, an empty OR does not.
                sql.push_str(if *op == LogicOp::And { "(1)" } else { "(0)" });
                return Ok(());
            }
            sql.push('(');
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    sql.push_str(match op {
                        LogicOp::And => " AND ",
                        LogicOp::Or => " OR ",
                    });
                }
                condition(child, sql, params)?;
            }
            sql.push(')');
        }
    }
    Ok(())
}

/// A filter value as SQLite stores the column's values: booleans as 1 and 0.
fn stored(kind: ValueKind, value: &str) -> String {
    if kind == ValueKind::Bool {
        match value.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "on" | "1" => return "1".into(),
            "false" | "f" | "no" | "n" | "off" | "0" => return "0".into(),
            _ => {}
        }
    }
    value.to_owned()
}

fn operation(e: &Expr, kind: ValueKind, op: &Operation, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    match op {
        Operation::Compare { op, quantifier: Some(q), .. } => {
            let q = match q {
                Quantifier::Any => "any",
                Quantifier::All => "all",
            };
            return Err(unsupported(format!("The operator {}({q})", operator_name(*op))));
        }
        Operation::Compare { op, quantifier: None, value } => {
            expr(e, sql, params)?;
            match op {
                CompareOp::Eq => sql.push_str(" = "),
                CompareOp::Neq => sql.push_str(" <> "),
                CompareOp::Gt => sql.push_str(" > "),
                CompareOp::Gte => sql.push_str(" >= "),
                CompareOp::Lt => sql.push_str(" < "),
                CompareOp::Lte => sql.push_str(" <= "),
                // SQLite's LIKE ignores ASCII case; GLOB is the case-sensitive match.
                CompareOp::Like => {
                    sql.push_str(" GLOB ");
                    params.push(sql, like_to_glob(value));
                    return Ok(());
                }
                CompareOp::Ilike => {
                    sql.push_str(" LIKE ");
                    params.push(sql, value.replace('*', "%"));
                    sql.push_str(" ESCAPE '\\'");
                    return Ok(());
                }
                other => return Err(unsupported(format!("The operator {}", operator_name(*other)))),
            }
            params.push(sql, stored(kind, value));
        }
        Operation::In(items) => {
            expr(e, sql, params)?;
            sql.push_str(" IN (");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                params.push(sql, stored(kind, item));
            }
            sql.push(')');
        }
        Operation::Is(v) => {
            expr(e, sql, params)?;
            sql.push_str(match v {
                IsValue::Null | IsValue::Unknown => " IS NULL",
                IsValue::NotNull => " IS NOT NULL",
                IsValue::True => " IS TRUE",
                IsValue::False => " IS FALSE",
            });
        }
        Operation::IsDistinct(value) => {
            expr(e, sql, params)?;
            sql.push_str(" IS NOT ");
            params.push(sql, stored(kind, value));
        }
        Operation::Fts { .. } => return Err(unsupported("Full-text search (fts, plfts, phfts, wfts)")),
    }
    Ok(())
}

/// The operator as the URL spells it.
fn operator_name(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Eq => "eq",
        CompareOp::Neq => "neq",
        CompareOp::Gt => "gt",
        CompareOp::Gte => "gte",
        CompareOp::Lt => "lt",
        CompareOp::Lte => "lte",
        CompareOp::Like => "like",
        CompareOp::Ilike => "ilike",
        CompareOp::Match => "match",
        CompareOp::Imatch => "imatch",
        CompareOp::Contains => "cs",
        CompareOp::Contained => "cd",
        CompareOp::Overlap => "ov",
        CompareOp::StrictlyLeft => "sl",
        CompareOp::StrictlyRight => "sr",
        CompareOp::NotExtendRight => "nxr",
        CompareOp::NotExtendLeft => "nxl",
        CompareOp::Adjacent => "adj",
    }
}

/// A LIKE pattern (`*` or `%` for any run, `_` for one character, `\` escaping) as a GLOB
/// pattern, with GLOB's own metacharacters made literal.
fn like_to_glob(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    let literal = |out: &mut String, c: char| match c {
        '*' => out.push_str("[*]"),
        '?' => out.push_str("[?]"),
        '[' => out.push_str("[[]"),
        // A lone `]` is literal in GLOB.
        c => out.push(c),
    };
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' | '%' => out.push('*'),
            '_' => out.push('?'),
            '\\' => match chars.next() {
                Some(escaped) => literal(&mut out, escaped),
                None => literal(&mut out, '\\'),
            },
            c => literal(&mut out, c),
        }
    }
    out
}

/// `ORDER BY` with PostgreSQL's placement of NULLs where the request names none (last when
/// ascending, first when descending), which is the opposite of SQLite's.
fn order_by(order: &[OrderBy], sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    for (i, o) in order.iter().enumerate() {
        sql.push_str(if i == 0 { " ORDER BY " } else { ", " });
        expr(&o.expr, sql, params)?;
        let desc = o.term.direction == Some(Direction::Desc);
        sql.push_str(if desc { " DESC" } else { " ASC" });
        let nulls_first = match o.term.nulls {
            Some(NullsOrder::First) => true,
            Some(NullsOrder::Last) => false,
            None => desc,
        };
        sql.push_str(if nulls_first { " NULLS FIRST" } else { " NULLS LAST" });
    }
    Ok(())
}

/// `LIMIT` / `OFFSET` (SQLite needs a LIMIT for an OFFSET: -1 is none).
fn window(w: RowWindow, sql: &mut String) {
    match (w.limit, w.offset) {
        (Some(limit), _) => {
            sql.push_str(" LIMIT ");
            sql.push_str(itoa::Buffer::new().format(limit));
        }
        (None, 0) => return,
        (None, _) => sql.push_str(" LIMIT -1"),
    }
    if w.offset > 0 {
        sql.push_str(" OFFSET ");
        sql.push_str(itoa::Buffer::new().format(w.offset));
    }
}

#[cfg(test)]
mod tests {
    use super::like_to_glob;

    #[test]
    fn like_patterns_become_glob_patterns_with_glob_metacharacters_literal() {
        assert_eq!(like_to_glob("*ab_c%"), "*ab?c*");
        assert_eq!(like_to_glob("a?b[c]"), "a[?]b[[]c]");
        assert_eq!(like_to_glob(r"100\%"), "100%");
        assert_eq!(like_to_glob(r"a\*"), "a[*]");
    }
}
