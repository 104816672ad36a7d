//! The SQLite dialect of a read: one statement that returns the whole JSON body built by
//! SQLite's JSON functions (`json_object`, `json_group_array`, correlated subqueries for
//! embedded resources) with the number of rows in it, and a count statement for
//! `Prefer: count=...`. What SQLite cannot express is refused with PostgREST's error shape,
//! never answered differently.

use rowgate_request::{CompareOp, Direction, IsValue, JsonKey, LogicOp, NullsOrder, Operation, Quantifier};

use crate::backend::{push_ident, Statement};

mod fts5;
use crate::error::{code, sqlstate, Error};
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

fn unsupported(what: impl std::fmt::Display) -> Error {
    Error::api(code::UNSUPPORTED, format!("{what} is not supported on the SQLite backend"))
}

/// Renders a read plan for SQLite, every table restricted to the rows `rules` allow.
pub fn render_read(plan: &ReadPlan, rules: &RowRules) -> Result<SqliteRead, Error> {
    if plan.call.is_some() {
        return Err(unsupported("Calling a function (/rpc)"));
    }
    // (CSV is rendered from the JSON rows, see `csv_from_json`.)
    if !matches!(
        plan.media,
        Media::Json { strip_nulls: false } | Media::Single { strip_nulls: false } | Media::Csv
    ) {
        return Err(unsupported(format!("The media type {}", plan.media.content_type())));
    }
    let mut params = Ctx::new(rules);
    let mut sql = String::with_capacity(256);
    // One JSON object per row, joined into the array by the caller: json_group_array would
    // parse every object again (its JSON-ness is lost crossing the subquery), which cost more
    // than building them (s003-customers: 500 rows).
    sql.push_str("SELECT ");
    object(&plan.columns, &mut sql, &mut params)?;
    source(&plan.relation.name.name, 0, &mut sql);
    where_clause(&plan.relation.name.name, &plan.conditions, &mut sql, &mut params)?;
    order_by(&plan.order, &mut sql, &mut params)?;
    window(plan.window, &mut sql);
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
            Expr::Cast(inner, _) => expr(inner, out),
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
        // A REAL with no fraction: SQLite's JSON writes 3.0 where PostgreSQL's float8 writes 3.
        (_, ValueKind::Numeric) => {
            sql.push_str(
                "(SELECT CASE WHEN typeof(pgrst_v) = 'real' AND pgrst_v = CAST(pgrst_v AS INTEGER) \
                AND abs(pgrst_v) < 1e15 THEN CAST(pgrst_v AS INTEGER) ELSE pgrst_v END FROM (SELECT ",
            );
            expr(&col.expr, sql, params)?;
            sql.push_str(" AS pgrst_v))");
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
            // SQLite's -> fails on text that is not JSON, PostgreSQL's on a column that is not
            // json: here that would fail or not by the rows a filter meets, rows the caller's
            // rule may hide. Not JSON reads as null instead, whatever the rows.
            sql.push_str("(CASE WHEN json_valid(");
            push_ident(sql, column);
            sql.push_str(", 10) THEN ");
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
            sql.push_str(" END)");
        }
        Expr::Embed(embed) => embedded(embed, sql, params)?,
        Expr::Cast(inner, ty) => {
            let target = match ty.as_str() {
                "text" | "varchar" | "character varying" | "char" | "character" | "bpchar" | "name"
                | "citext" => "TEXT",
                "int2" | "smallint" | "int4" | "int" | "integer" | "int8" | "bigint" => "INTEGER",
                "numeric" | "decimal" => "NUMERIC",
                "float4" | "real" | "float8" | "double precision" | "float" => "REAL",
                // PostgreSQL's boolean input words; a number is true unless 0.
                "bool" | "boolean" => {
                    sql.push_str(
                        "(SELECT CASE WHEN pgrst_c IS NULL THEN NULL \
                        WHEN lower(trim(pgrst_c)) IN ('t', 'true', 'y', 'yes', 'on') THEN 1 \
                        WHEN lower(trim(pgrst_c)) IN ('f', 'false', 'n', 'no', 'off') THEN 0 \
                        ELSE CAST(pgrst_c AS NUMERIC) <> 0 END FROM (SELECT ",
                    );
                    expr(inner, sql, params)?;
                    sql.push_str(" AS pgrst_c))");
                    return Ok(());
                }
                // (Guarded as JSON paths are: text that is not JSON casts to null.)
                "json" | "jsonb" => {
                    sql.push_str(
                        "(SELECT CASE WHEN json_valid(pgrst_c, 10) THEN json(pgrst_c) END FROM (SELECT ",
                    );
                    expr(inner, sql, params)?;
                    sql.push_str(" AS pgrst_c))");
                    return Ok(());
                }
                other => return Err(unsupported(format!("A cast to {other}"))),
            };
            sql.push_str("CAST(");
            expr(inner, sql, params)?;
            sql.push_str(" AS ");
            sql.push_str(target);
            sql.push(')');
        }
        Expr::Aggregate(..) => return Err(unsupported("An aggregate function")),
        Expr::Related { embed, .. } if embed.computed.is_some() => {
            return Err(unsupported("A computed relationship"))
        }
        // A to-one embedded row's value (a spread column, or what a related order sorts by).
        Expr::Related { embed, expr: value, many: false } => {
            sql.push_str("(SELECT ");
            expr(value, sql, params)?;
            related_rows(embed, sql, params)?;
            order_by(&embed.order, sql, params)?;
            sql.push_str(" LIMIT 1)");
        }
        // A to-many spread column: the array of the value over the embedded rows.
        Expr::Related { embed, expr: value, many: true } => {
            let kind = match &**value {
                Expr::Column(c) => embed.relation.column(c).map_or(ValueKind::Other, |c| c.kind),
                _ => ValueKind::Other,
            };
            let column = OutputColumn { key: String::new(), kind, expr: (**value).clone() };
            // (JSON values lose their JSON-ness in the subquery's column: json() again.)
            let json = matches!(kind, ValueKind::Bool | ValueKind::Json);
            sql.push_str(if json {
                "(SELECT coalesce(json_group_array(json(pgrst_s.v)), '[]') FROM (SELECT "
            } else {
                "(SELECT coalesce(json_group_array(pgrst_s.v), '[]') FROM (SELECT "
            });
            self::value(&column, sql, params)?;
            sql.push_str(" AS v");
            related_rows(embed, sql, params)?;
            order_by(&embed.order, sql, params)?;
            window(embed.window, sql);
            sql.push_str(") AS pgrst_s)");
        }
        Expr::Computed { .. } => return Err(unsupported("A computed field")),
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
    // The rule before the request's conditions (which cannot fail by what rows hold anyway).
    params.rule(&embed.relation.name.name, sql)?;
    for c in &embed.conditions {
        sql.push_str(" AND ");
        condition(c, sql, params)?;
    }
    Ok(())
}

/// ` WHERE 1 AND <the table's rule> AND <conditions>`.
fn where_clause(table: &str, conditions: &[Condition], sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    // A scan of its own (an embedded resource's, under whatever its parent's condition is).
    let allowed = std::mem::replace(&mut params.match_allowed, true);
    sql.push_str(" WHERE 1");
    let rendered = params.rule(table, sql).and_then(|()| {
        conditions.iter().try_for_each(|c| {
            sql.push_str(" AND ");
            condition(c, sql, params)
        })
    });
    params.match_allowed = allowed;
    rendered
}

fn condition(c: &Condition, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    match c {
        Condition::Filter { expr: e, kind, filter } => {
            if filter.negated {
                sql.push_str("NOT ");
            }
            sql.push('(');
            let allowed = params.match_allowed;
            params.match_allowed &= !filter.negated;
            let rendered = operation(e, *kind, &filter.operation, sql, params);
            params.match_allowed = allowed;
            rendered?;
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
            let allowed = params.match_allowed;
            let only_matches = children.iter().all(|c| {
                matches!(c, Condition::Filter { filter, .. }
                    if !filter.negated && matches!(filter.operation, Operation::Fts { .. }))
            });
            params.match_allowed &= !*negated && (*op == LogicOp::And || only_matches);
            let rendered = children.iter().enumerate().try_for_each(|(i, child)| {
                if i > 0 {
                    sql.push_str(match op {
                        LogicOp::And => " AND ",
                        LogicOp::Or => " OR ",
                    });
                }
                condition(child, sql, params)
            });
            params.match_allowed = allowed;
            rendered?;
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
                // rowgate's `regexp` function (db::sqlite): Rust's regex syntax, linear time.
                CompareOp::Match | CompareOp::Imatch => {
                    let pattern =
                        if *op == CompareOp::Imatch { format!("(?i){value}") } else { value.clone() };
                    if let Err(e) = crate::backend::sqlite::db::compile_regex(&pattern) {
                        return Err(crate::backend::sqlite::db::invalid_regex(e));
                    }
                    sql.push_str(" REGEXP ");
                    params.push(sql, pattern);
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
        Operation::Fts { op, value, .. } => {
            // SQLite's full-text search is FTS5's index: only an FTS5 table's columns have one.
            // (The language argument is ignored: the table's tokenizer decides.)
            if kind != ValueKind::TsVector {
                return Err(unsupported("Full-text search on a column outside an FTS5 table"));
            }
            if !params.match_allowed {
                return Err(unsupported("Full-text search inside not or or=(...)"));
            }
            match fts5::query(*op, value).map_err(|why| unsupported(format!("A text search with {why}")))? {
                None => sql.push('0'),
                Some(query) => {
                    expr(e, sql, params)?;
                    sql.push_str(" MATCH ");
                    params.push(sql, query);
                }
            }
        }
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
    use super::{csv_from_json, like_to_glob};

    #[test]
    fn csv_fields_are_quoted_as_postgresql_writes_record_fields() {
        let body = r#"[{"id":1,"name":"a b","ok":true,"n":null,"q":"say \"hi\"","e":""},{"id":2,"name":"x","ok":false,"n":1.5,"q":"a,b","e":"c"}]"#;
        let header = ["id", "name", "ok", "n", "q", "e"].map(String::from);
        assert_eq!(
            String::from_utf8(csv_from_json(body, &header)).unwrap(),
            "id,name,ok,n,q,e\n1,\"a b\",t,,\"say \"\"hi\"\"\",\"\"\n2,x,f,1.5,\"a,b\",c"
        );
        assert_eq!(csv_from_json("[]", &header), b"\n");
    }

    #[test]
    fn like_patterns_become_glob_patterns_with_glob_metacharacters_literal() {
        assert_eq!(like_to_glob("*ab_c%"), "*ab?c*");
        assert_eq!(like_to_glob("a?b[c]"), "a[?]b[[]c]");
        assert_eq!(like_to_glob(r"100\%"), "100%");
        assert_eq!(like_to_glob(r"a\*"), "a[*]");
    }
}

/// The statements of a write on SQLite, run in one transaction on the read-write connection.
/// The write returns the rowids it wrote; the statements after it take them as `?1` (a JSON
/// array).
#[derive(Debug, Clone)]
pub struct SqliteWrite {
    /// Run first: the representation of the rows a DELETE is about to remove (body, count).
    pub before: Option<Statement>,
    /// The write, `RETURNING rowid`.
    pub write: Statement,
    /// The number of written rows the caller's rule for the operation does not allow (which
    /// fails the write, as a policy's `WITH CHECK` does).
    pub check: Option<Statement>,
    /// The representation of the written rows (body, count).
    pub representation: Option<Statement>,
    /// The primary key values (a JSON array of text) of the first row, for `Location`.
    pub location: Option<Statement>,
    /// Run before the write: how many of an upsert's rows it will insert (not update).
    pub inserted: Option<Statement>,
}

/// Renders a write plan for SQLite. `rule` is the caller's row condition for the operation
/// (`None`: every row); `rules` the read rules that shape the representation.
pub fn render_write(
    plan: &crate::plan::MutatePlan,
    rule: Option<&Condition>,
    update_rule: Option<&Condition>,
    rules: &RowRules,
) -> Result<SqliteWrite, Error> {
    use crate::plan::{Mutation, Returning};
    let mut inserted = None;
    if !matches!(plan.media, Media::Json { strip_nulls: false } | Media::Single { strip_nulls: false }) {
        return Err(unsupported(format!("The media type {}", plan.media.content_type())));
    }
    if !plan.nested.is_empty() {
        return Err(unsupported("A nested insert"));
    }
    let table = plan.relation.name.name.as_str();
    if let Mutation::Insert { payload, .. } | Mutation::Update { payload, .. } = &plan.mutation {
        json_text_valid(plan, payload)?;
    }
    let mut params = Ctx::new(rules);
    let mut sql = String::with_capacity(256);
    // The operation's rule restricts the rows written (its `USING`).
    let restricted = |sql: &mut String, params: &mut Ctx<'_>| -> Rendered {
        sql.push_str(" WHERE 1");
        if let Some(r) = rule {
            sql.push_str(" AND ");
            condition(r, sql, params)?;
        }
        for c in &plan.conditions {
            sql.push_str(" AND ");
            condition(c, sql, params)?;
        }
        Ok(())
    };
    let mut before = None;
    match &plan.mutation {
        Mutation::Insert { payload, columns, missing_default, on_conflict, put_key } => {
            // OR ABORT: a constraint declared ON CONFLICT REPLACE would otherwise delete the
            // conflicting row, which no delete rule was asked about.
            sql.push_str("INSERT OR ABORT INTO ");
            push_ident(&mut sql, table);
            if columns.is_empty() {
                if payload.rows != 1 {
                    return Err(unsupported("Inserting several rows with no columns"));
                }
                sql.push_str(" DEFAULT VALUES");
            } else {
                sql.push_str(" (");
                for (i, c) in columns.iter().enumerate() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    push_ident(&mut sql, &c.name);
                }
                sql.push_str(") SELECT ");
                for (i, c) in columns.iter().enumerate() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    let kind = value_kind(plan, &c.name, payload.textual);
                    let default = c.default.as_deref().unwrap_or("NULL");
                    if *missing_default || !c.in_payload {
                        sql.push_str(
                            "CASE WHEN EXISTS (SELECT 1 FROM json_each(pgrst_body.value) WHERE key = ",
                        );
                        params.push(&mut sql, c.name.clone());
                        sql.push_str(") THEN ");
                        body_value(&mut sql, &mut params, "pgrst_body.value", &c.name, kind);
                        // The column's default: SQL text from the database's own schema.
                        sql.push_str(" ELSE (");
                        sql.push_str(default);
                        sql.push_str(") END");
                    } else {
                        body_value(&mut sql, &mut params, "pgrst_body.value", &c.name, kind);
                    }
                }
                sql.push_str(" FROM json_each(");
                params.push(&mut sql, payload.json.clone());
                // (`WHERE true` keeps the parser from reading an upsert clause here.)
                sql.push_str(") AS pgrst_body WHERE true");
                put_matches(&mut sql, &mut params, put_key);
                if let Some(conflict) = on_conflict {
                    unique_target(&plan.relation, &conflict.target)?;
                    sql.push_str(" ON CONFLICT (");
                    for (i, c) in conflict.target.iter().enumerate() {
                        if i > 0 {
                            sql.push_str(", ");
                        }
                        push_ident(&mut sql, c);
                    }
                    if conflict.merge {
                        sql.push_str(") DO UPDATE SET ");
                        for (i, c) in columns.iter().enumerate() {
                            if i > 0 {
                                sql.push_str(", ");
                            }
                            push_ident(&mut sql, &c.name);
                            sql.push_str(" = excluded.");
                            push_ident(&mut sql, &c.name);
                        }
                        // Only rows the caller may update are (its update rule's `USING`).
                        if let Some(u) = update_rule {
                            sql.push_str(" WHERE ");
                            condition(u, &mut sql, &mut params)?;
                        }
                    } else {
                        sql.push_str(") DO NOTHING");
                    }
                    if plan.tracks_inserts() {
                        inserted = Some(inserts_of(table, payload, conflict, put_key, rules)?);
                    }
                }
            }
        }
        Mutation::Update { payload, columns } => {
            if columns.is_empty() {
                // Nothing to set: nothing written, as with PostgREST.
                sql.push_str("SELECT rowid FROM ");
                push_ident(&mut sql, table);
                sql.push_str(" WHERE 0");
                return Ok(SqliteWrite {
                    before: None,
                    write: Statement { text: sql, params: params.values },
                    check: None,
                    representation: representation(plan, rules, None)?,
                    location: None,
                    inserted: None,
                });
            }
            sql.push_str("UPDATE OR ABORT ");
            push_ident(&mut sql, table);
            sql.push_str(" AS pgrst_0 SET ");
            let mut object = String::new();
            params.push(&mut object, payload.json.clone());
            let object = format!("({object} -> 0)");
            for (i, c) in columns.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                push_ident(&mut sql, &c.name);
                sql.push_str(" = ");
                if c.in_payload {
                    let kind = value_kind(plan, &c.name, payload.textual);
                    body_value(&mut sql, &mut params, &object, &c.name, kind);
                } else {
                    sql.push('(');
                    sql.push_str(c.default.as_deref().unwrap_or("NULL"));
                    sql.push(')');
                }
            }
            restricted(&mut sql, &mut params)?;
        }
        Mutation::UpdateByKey { .. } => return Err(unsupported("Prefer: patch=by-key")),
        Mutation::Delete => {
            // The rows as they are, read just before they go.
            before = representation(plan, rules, Some(&restricted))?;
            sql.push_str("DELETE FROM ");
            push_ident(&mut sql, table);
            sql.push_str(" AS pgrst_0");
            restricted(&mut sql, &mut params)?;
        }
    }
    sql.push_str(" RETURNING rowid");
    let inserting = matches!(plan.mutation, Mutation::Insert { .. });
    // Every row an upsert writes must satisfy the insert rule, and the update rule too when
    // it may have updated rows.
    let merging = matches!(&plan.mutation, Mutation::Insert { on_conflict: Some(c), .. } if c.merge);
    let both;
    let rule = match (rule, update_rule.filter(|_| merging)) {
        (Some(i), Some(u)) => {
            both =
                Condition::Logic { negated: false, op: LogicOp::And, children: vec![i.clone(), u.clone()] };
            Some(&both)
        }
        (r, u) => r.or(u),
    };
    let check = match (rule, &plan.mutation) {
        (Some(r), Mutation::Insert { .. } | Mutation::Update { .. }) => {
            let mut p = Ctx::new(rules);
            let mut text = String::from("SELECT count(*)");
            source(table, 0, &mut text);
            text.push_str(" WHERE rowid IN (SELECT value FROM json_each(");
            p.push(&mut text, String::new());
            text.push_str(")) AND NOT coalesce((");
            condition(r, &mut text, &mut p)?;
            text.push_str("), 0)");
            Some(Statement { text, params: p.values })
        }
        _ => None,
    };
    let location = match (&plan.returning, inserting) {
        (Returning::Location(pk), true) if !pk.is_empty() => {
            let mut text = String::from("SELECT json_array(");
            for (i, c) in pk.iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                text.push_str("CAST(");
                push_ident(&mut text, c);
                text.push_str(" AS TEXT)");
            }
            text.push_str(") FROM ");
            push_ident(&mut text, table);
            text.push_str(" WHERE rowid = (SELECT value FROM json_each(?1) LIMIT 1)");
            // Only a row the caller may read is named (its select rule, as for a representation).
            let mut p = Ctx::new(rules);
            p.values.push(String::new());
            p.rule(table, &mut text)?;
            Some(Statement { text, params: p.values })
        }
        _ => None,
    };
    let representation = match plan.mutation {
        Mutation::Delete => None,
        _ => representation(plan, rules, None)?,
    };
    Ok(SqliteWrite {
        before,
        write: Statement { text: sql, params: params.values },
        check,
        representation,
        location,
        inserted,
    })
}

/// PostgreSQL's 42P10 for an `on_conflict` target that is not the primary key or a unique
/// key: SQLite would refuse the statement in its own words.
fn unique_target(relation: &crate::schema::Relation, target: &[String]) -> Rendered {
    let same = |key: &Vec<String>| key.len() == target.len() && key.iter().all(|k| target.contains(k));
    if same(&relation.primary_key) || relation.unique_keys.iter().any(same) {
        return Ok(());
    }
    Err(Error::sql(
        sqlstate::INVALID_COLUMN_REFERENCE,
        "there is no unique or exclusion constraint matching the ON CONFLICT specification",
        false,
    ))
}

/// PostgreSQL's 22P02 for text (a CSV or form body) sent for a JSON column that is no JSON:
/// SQLite's `json()` would refuse it in its own words, or take JSON5 PostgreSQL refuses.
fn json_text_valid(plan: &crate::plan::MutatePlan, payload: &crate::plan::Payload) -> Rendered {
    let json_columns: Vec<&str> =
        plan.relation.columns.iter().filter(|c| c.kind == ValueKind::Json).map(|c| c.name.as_str()).collect();
    if !payload.textual || json_columns.is_empty() {
        return Ok(());
    }
    let rows: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(&payload.json).unwrap_or_default();
    let invalid = rows.iter().flat_map(|row| json_columns.iter().filter_map(|c| row.get(*c))).any(|v| {
        matches!(v, serde_json::Value::String(text)
            if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err())
    });
    match invalid {
        true => Err(Error::sql(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            "invalid input syntax for type json",
            false,
        )),
        false => Ok(()),
    }
}

/// PUT: only a body row whose key is the URL's is written (else nothing is, and the request
/// fails with PGRST115).
fn put_matches(sql: &mut String, params: &mut Ctx<'_>, put_key: &[(String, String)]) {
    for (column, value) in put_key {
        sql.push_str(" AND CAST((pgrst_body.value ->> ");
        params.push(sql, column.clone());
        sql.push_str(") AS TEXT) = ");
        params.push(sql, value.clone());
    }
}

/// How many body rows of an upsert have no row with their conflict target's values yet.
fn inserts_of(
    table: &str,
    payload: &crate::plan::Payload,
    conflict: &crate::plan::OnConflict,
    put_key: &[(String, String)],
    rules: &RowRules,
) -> Result<Statement, Error> {
    let mut p = Ctx::new(rules);
    let mut text = String::from("SELECT count(*) FROM json_each(");
    p.push(&mut text, payload.json.clone());
    text.push_str(") AS pgrst_body WHERE true");
    put_matches(&mut text, &mut p, put_key);
    text.push_str(" AND NOT EXISTS (SELECT 1 FROM ");
    push_ident(&mut text, table);
    text.push_str(" AS pgrst_t WHERE true");
    for c in &conflict.target {
        text.push_str(" AND pgrst_t.");
        push_ident(&mut text, c);
        text.push_str(" = (pgrst_body.value ->> ");
        p.push(&mut text, c.clone());
        text.push(')');
    }
    text.push(')');
    Ok(Statement { text, params: p.values })
}

/// A body object's value for a column: its SQL value (`->>`: JSON true is 1), or for JSON
/// columns its JSON text (`->`).
/// How a body's value becomes a column's.
#[derive(Clone, Copy)]
enum BodyValue {
    /// A JSON value: its SQL value (`->>`: strings as text, numbers as numbers, booleans 1/0).
    Sql,
    /// A JSON value into a JSON column: the JSON itself.
    Json,
    /// Text (CSV, form) read as PostgreSQL reads a boolean's input.
    TextBool,
    /// Text into a JSON column: parsed as JSON.
    TextJson,
}

fn value_kind(plan: &crate::plan::MutatePlan, column: &str, textual: bool) -> BodyValue {
    let kind = plan.relation.column(column).map(|c| c.kind);
    match (kind, textual) {
        (Some(ValueKind::Json), false) => BodyValue::Json,
        (Some(ValueKind::Json), true) => BodyValue::TextJson,
        (Some(ValueKind::Bool), true) => BodyValue::TextBool,
        _ => BodyValue::Sql,
    }
}

fn body_value(sql: &mut String, params: &mut Ctx<'_>, object: &str, key: &str, kind: BodyValue) {
    let get = |sql: &mut String, params: &mut Ctx<'_>, op: &str| {
        sql.push('(');
        sql.push_str(object);
        sql.push_str(op);
        params.push(sql, key.to_owned());
        sql.push(')');
    };
    match kind {
        BodyValue::Sql => get(sql, params, " ->> "),
        BodyValue::Json => get(sql, params, " -> "),
        BodyValue::TextJson => {
            sql.push_str("json(");
            get(sql, params, " ->> ");
            sql.push(')');
        }
        BodyValue::TextBool => {
            // PostgreSQL's boolean input words; anything else is stored as sent (SQLite's
            // flexible typing, as for any other mistyped value).
            sql.push_str("(SELECT CASE lower(trim(pgrst_v)) WHEN 't' THEN 1 WHEN 'true' THEN 1 WHEN 'y' THEN 1 \
                WHEN 'yes' THEN 1 WHEN 'on' THEN 1 WHEN '1' THEN 1 WHEN 'f' THEN 0 WHEN 'false' THEN 0 \
                WHEN 'n' THEN 0 WHEN 'no' THEN 0 WHEN 'off' THEN 0 WHEN '0' THEN 0 ELSE pgrst_v END FROM (SELECT ");
            get(sql, params, " ->> ");
            sql.push_str(" AS pgrst_v))");
        }
    }
}

/// Writes the WHERE clause that selects a write's rows.
type RowSelection<'a> = dyn Fn(&mut String, &mut Ctx<'_>) -> Rendered + 'a;

/// The representation of the rows written (rowids in `?1`), or of those `rows` selects, as the
/// read rules let the caller see them.
fn representation(
    plan: &crate::plan::MutatePlan,
    rules: &RowRules,
    rows: Option<&RowSelection<'_>>,
) -> Result<Option<Statement>, Error> {
    let crate::plan::Returning::Representation(columns) = &plan.returning else { return Ok(None) };
    let table = plan.relation.name.name.as_str();
    let mut p = Ctx::new(rules);
    if rows.is_none() {
        p.values.push(String::new()); // ?1: the rowids written
    }
    let mut text =
        String::from("SELECT coalesce(json_group_array(json(pgrst_row)), '[]'), count(*) FROM (SELECT ");
    object(columns, &mut text, &mut p)?;
    text.push_str(" AS pgrst_row");
    source(table, 0, &mut text);
    match rows {
        None => text.push_str(" WHERE pgrst_0.rowid IN (SELECT value FROM json_each(?1))"),
        Some(rows) => rows(&mut text, &mut p)?,
    }
    for c in &plan.output_conditions {
        text.push_str(" AND ");
        condition(c, &mut text, &mut p)?;
    }
    p.rule(table, &mut text)?;
    text.push_str(" ORDER BY pgrst_0.rowid)");
    Ok(Some(Statement { text, params: p.values }))
}

/// PostgREST's CSV of a JSON array of objects: the keys as a header line (when there are rows),
/// then one line per row, each value as PostgreSQL writes a record's field — unquoted unless
/// it is empty or holds a comma, quote, parenthesis, backslash or white space; quotes and
/// backslashes doubled inside; NULL as nothing; booleans as `t`/`f`; JSON as its text.
pub fn csv_from_json(body: &str, header: &[String]) -> Vec<u8> {
    let rows: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(body).unwrap_or_default();
    let mut out = Vec::with_capacity(64 + body.len());
    if !rows.is_empty() {
        out.extend_from_slice(header.join(",").as_bytes());
    }
    out.push(b'\n');
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        for (j, value) in row.values().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            let text = match value {
                serde_json::Value::Null => continue,
                serde_json::Value::Bool(b) => (if *b { "t" } else { "f" }).to_owned(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let quote = text.is_empty()
                || text.chars().any(|c| matches!(c, '"' | '\\' | '(' | ')' | ',') || c.is_ascii_whitespace());
            if quote {
                out.push(b'"');
                for c in text.chars() {
                    if c == '"' || c == '\\' {
                        out.push(c as u8);
                    }
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                out.push(b'"');
            } else {
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
    out
}
