//! The statements of a read: the main SELECT (with the exact count folded in when asked for),
//! and an `EXPLAIN` for planned and estimated counts.

use rowgate_request::{Aggregate, Direction, JsonKey, NullsOrder, PreferCount};

use super::call::{call_source, handler_read};
use super::filter::{condition, where_clause};
use super::{push_ident, push_qualified, Params, Render, Statement};
use crate::plan::{EmbedPlan, Expr, Media, OrderBy, OutputColumn, ReadPlan, RowWindow};
use crate::schema::ValueKind;

/// How the rows of the main statement are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowShape {
    /// One row per result row, one column per output key.
    Json {
        /// JSON keys with their rendering, in order.
        columns: Vec<(String, Render)>,
    },
    /// One text column per row: the row's record text (PostgREST's CSV rows).
    Csv {
        /// Header names.
        columns: Vec<String>,
    },
    /// One GeoJSON Feature (text) per row.
    GeoJson,
    /// No values: HEAD only needs the number of rows.
    Empty,
    /// One row: the body a media type handler made (bytes), the number of rows it read, and
    /// (when counted) the total.
    Handler,
}

/// Everything the database stage runs for one read.
#[derive(Debug, Clone)]
pub struct ReadStatements {
    /// The main statement.
    pub main: Statement,
    /// With an exact count, the main statement's first column is the total and its second
    /// is non-null when the row is a real row (the page may be empty).
    pub counted: bool,
    /// Layout of the main statement's (remaining) columns.
    pub shape: RowShape,
    /// `EXPLAIN (FORMAT JSON)` of the count query, for planned/estimated counts.
    pub explain: Option<Statement>,
    /// For estimated counts: the exact count stops at this many rows (db-max-rows + 1).
    pub estimate_threshold: Option<u64>,
}

/// Renders the statements of a read plan.
pub fn render_read(plan: &ReadPlan, max_rows: Option<u64>) -> ReadStatements {
    let mut params = Params::default();
    // The WHERE clause is rendered first so that its parameters are $1..$k, which lets the
    // EXPLAIN of planned counts reuse them alone.
    let mut from_where = String::with_capacity(128);
    from_where.push_str(" FROM ");
    match &plan.call {
        None => {
            push_ident(&mut from_where, &plan.relation.name.schema);
            from_where.push('.');
            push_ident(&mut from_where, &plan.relation.name.name);
        }
        Some(call) => call_source(call, &mut from_where, &mut params),
    }
    // Embedded resources correlate with the top-level relation through this alias.
    from_where.push_str(" AS pgrst_0");
    where_clause(&plan.conditions, &mut from_where, &mut params);
    let where_params = params.0.len();

    if let (Some(handler), false) = (&plan.handler, plan.head) {
        return handler_read(plan, handler, from_where, params);
    }
    let mut list = String::with_capacity(256);
    let shape =
        select_list(&plan.columns, plan.media, plan.head, plan.postgis.as_deref(), &mut list, &mut params);

    let exact = match plan.count {
        Some(PreferCount::Exact) => Some(None),
        // Counting stops one past db-max-rows; beyond that the planner's estimate is used.
        Some(PreferCount::Estimated) => Some(max_rows.map(|m| m.saturating_add(1))),
        _ => None,
    };
    let mut text = String::with_capacity(2 * (list.len() + from_where.len()) + 128);
    if let Some(threshold) = exact {
        // One statement, one snapshot: the total joined with the (possibly empty) page.
        text.push_str(
            "SELECT pgrst_total.n, pgrst_page.* FROM (SELECT pg_catalog.count(*) AS n FROM (SELECT 1",
        );
        text.push_str(&from_where);
        if let Some(t) = threshold {
            text.push_str(" LIMIT ");
            push_count(&mut text, t);
        }
        text.push_str(") pgrst_counted) pgrst_total LEFT JOIN LATERAL (SELECT 1 AS pgrst_present");
        if !list.is_empty() {
            text.push_str(", ");
        }
    } else {
        text.push_str("SELECT ");
    }
    text.push_str(&list);
    text.push_str(&from_where);
    // Select-list positions where the list is one entry per output column (so a JSON path's
    // bound key need not be written twice), the expressions otherwise.
    let positions = match (plan.head, plan.media) {
        (false, Media::Json { .. } | Media::Single { .. }) => Some(usize::from(exact.is_some())),
        _ => None,
    };
    group_by(&plan.columns, positions, &mut text, &mut params);
    grouped_order_by(&plan.order, &plan.columns, positions, &mut text, &mut params);
    window(plan.window, &mut text);
    if exact.is_some() {
        text.push_str(") pgrst_page ON true");
    }
    let explain = match plan.count {
        Some(PreferCount::Planned | PreferCount::Estimated) => Some(Statement {
            text: format!("EXPLAIN (FORMAT JSON) SELECT 1{from_where}"),
            params: params.0[..where_params].to_vec(),
        }),
        _ => None,
    };
    ReadStatements {
        main: Statement { text, params: params.0 },
        counted: exact.is_some(),
        shape,
        explain,
        estimate_threshold: match plan.count {
            Some(PreferCount::Estimated) => max_rows.map(|m| m.saturating_add(1)),
            _ => None,
        },
    }
}

/// Writes the SELECT list of `columns` for `media` and returns how its rows are read back.
pub(crate) fn select_list(
    columns: &[OutputColumn],
    media: Media,
    head: bool,
    postgis: Option<&str>,
    sql: &mut String,
    params: &mut Params,
) -> RowShape {
    if head {
        // Zero columns is valid SQL: HEAD needs the row count only.
        return RowShape::Empty;
    }
    match media {
        Media::Csv => {
            // PostgREST's CSV rows are the record text of each row without its parentheses.
            sql.push_str("ROW(");
            for (i, col) in columns.iter().filter(|c| c.is_output()).enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                expr(&col.expr, sql, params);
            }
            sql.push_str(")::text");
            RowShape::Csv {
                columns: columns.iter().filter(|c| c.is_output()).map(|c| c.key.clone()).collect(),
            }
        }
        Media::GeoJson => {
            // A row becomes a Feature: PostGIS's ST_AsGeoJSON of a record of the output
            // columns (a correlated subquery with no FROM, so the keys are the column names).
            sql.push_str("(SELECT ");
            push_ident(sql, postgis.unwrap_or("public"));
            sql.push_str(".st_asgeojson(pgrst_g)::text FROM (SELECT ");
            aliased_list(columns, sql, params);
            sql.push_str(") pgrst_g)");
            RowShape::GeoJson
        }
        Media::Json { strip_nulls } | Media::Single { strip_nulls } => {
            let mut shape = Vec::with_capacity(columns.len());
            for (i, col) in columns.iter().filter(|c| c.is_output()).enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                shape.push((col.key.clone(), output(col, strip_nulls, sql, params)));
            }
            RowShape::Json { columns: shape }
        }
    }
}

/// `expr AS "key", ...` for the output columns: a record whose field names are the keys.
pub(crate) fn aliased_list(columns: &[OutputColumn], sql: &mut String, params: &mut Params) {
    for (i, col) in columns.iter().filter(|c| c.is_output()).enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        expr(&col.expr, sql, params);
        sql.push_str(" AS ");
        push_ident(sql, &col.key);
    }
}

/// Writes one output expression, wrapped in `to_json` unless rowgate renders its type.
fn output(col: &OutputColumn, strip_nulls: bool, sql: &mut String, params: &mut Params) -> Render {
    let nested_json = matches!(col.kind, ValueKind::Json | ValueKind::Jsonb | ValueKind::Other);
    match Render::native(col.kind) {
        Some(render) if !(strip_nulls && nested_json) => {
            expr(&col.expr, sql, params);
            render
        }
        _ => {
            sql.push_str(if strip_nulls { "json_strip_nulls(to_json(" } else { "to_json(" });
            expr(&col.expr, sql, params);
            sql.push_str(if strip_nulls { "))" } else { ")" });
            Render::Json
        }
    }
}

/// Writes a value expression.
pub(crate) fn expr(e: &Expr, sql: &mut String, params: &mut Params) {
    match e {
        Expr::Column(name) => push_ident(sql, name),
        Expr::Represented { function, expr: inner } => {
            push_qualified(sql, function);
            sql.push('(');
            expr(inner, sql, params);
            sql.push(')');
        }
        Expr::JsonPath { column, steps, to_jsonb } => {
            if *to_jsonb {
                sql.push_str("to_jsonb(");
                push_ident(sql, column);
                sql.push(')');
            } else {
                push_ident(sql, column);
            }
            for step in steps {
                sql.push_str(if step.as_text { "->>" } else { "->" });
                match &step.key {
                    JsonKey::Key(k) => {
                        // Untyped, like PostgREST's literal: `jsonb -> unknown` resolves to the
                        // text-key operator, and a wrong base type fails as it does there.
                        params.push(sql, k.clone());
                    }
                    JsonKey::Index(i) => {
                        sql.push('(');
                        sql.push_str(&i.to_string());
                        sql.push(')');
                    }
                }
            }
        }
        Expr::Cast(inner, ty) => {
            sql.push('(');
            expr(inner, sql, params);
            sql.push_str(")::");
            sql.push_str(ty);
        }
        Expr::Embed(embed) => embedded(embed, sql, params),
        Expr::Computed { function, depth } => {
            push_qualified(sql, function);
            sql.push_str("(pgrst_");
            push_count(sql, *depth as u64);
            sql.push(')');
        }
        Expr::Aggregate(agg, arg) => {
            sql.push_str(match agg {
                Aggregate::Count => "pg_catalog.count(",
                Aggregate::Sum => "pg_catalog.sum(",
                Aggregate::Avg => "pg_catalog.avg(",
                Aggregate::Max => "pg_catalog.max(",
                Aggregate::Min => "pg_catalog.min(",
            });
            match arg {
                Some(a) => expr(a, sql, params),
                None => sql.push('*'),
            }
            sql.push(')');
        }
        Expr::Related { embed, expr: value, many: false } => {
            sql.push_str("(SELECT ");
            expr(value, sql, params);
            related_rows(embed, sql, params);
            order_by(&embed.order, sql, params);
            sql.push_str(" LIMIT 1)");
        }
        Expr::Related { embed, expr: value, many: true } => {
            sql.push_str("(SELECT coalesce(json_agg(pgrst_s.v), '[]') FROM (SELECT ");
            expr(value, sql, params);
            sql.push_str(" AS v");
            related_rows(embed, sql, params);
            order_by(&embed.order, sql, params);
            window(embed.window, sql);
            sql.push_str(") pgrst_s)");
        }
    }
}

/// A correlated subquery that renders an embedded resource as JSON the way PostgREST's
/// `json_agg` / `row_to_json` do: an array for to-many (`[]` when empty), an object or null for
/// to-one.
fn embedded(embed: &EmbedPlan, sql: &mut String, params: &mut Params) {
    let rows = format!("pgrst_e{}", embed.depth);
    if embed.to_many {
        sql.push_str("(SELECT coalesce(json_agg(");
        sql.push_str(&rows);
        sql.push_str("), '[]') FROM (SELECT ");
    } else {
        sql.push_str("(SELECT row_to_json(");
        sql.push_str(&rows);
        sql.push_str(") FROM (SELECT ");
    }
    aliased_list(&embed.columns, sql, params);
    related_rows(embed, sql, params);
    group_by(&embed.columns, Some(0), sql, params);
    grouped_order_by(&embed.order, &embed.columns, Some(0), sql, params);
    window(embed.window, sql);
    sql.push_str(") ");
    sql.push_str(&rows);
    sql.push(')');
}

/// ` FROM <embedded relation> WHERE <join to the parent> AND <its conditions>`.
pub(super) fn related_rows(embed: &EmbedPlan, sql: &mut String, params: &mut Params) {
    let alias = format!("pgrst_{}", embed.depth);
    let parent = format!("pgrst_{}", embed.depth - 1);
    sql.push_str(" FROM ");
    if let Some(function) = &embed.computed {
        // A computed relationship: the function's rows for the parent's row are the related
        // rows; no join condition.
        push_qualified(sql, function);
        sql.push('(');
        sql.push_str(&parent);
        sql.push_str(") AS ");
        sql.push_str(&alias);
        sql.push_str(" WHERE true");
        for c in &embed.conditions {
            sql.push_str(" AND ");
            condition(c, sql, params);
        }
        return;
    }
    push_qualified(sql, &embed.relation.name);
    sql.push_str(" AS ");
    sql.push_str(&alias);
    let pair = |sql: &mut String, left: &str, left_col: &str, right: &str, right_col: &str| {
        sql.push_str(left);
        sql.push('.');
        push_ident(sql, left_col);
        sql.push_str(" = ");
        sql.push_str(right);
        sql.push('.');
        push_ident(sql, right_col);
    };
    match &embed.through {
        None => {
            for (i, (parent_col, child_col)) in embed.join.iter().enumerate() {
                sql.push_str(if i == 0 { " WHERE " } else { " AND " });
                pair(sql, &alias, child_col, &parent, parent_col);
            }
        }
        // Many-to-many as a semi-join on the join table, not a JOIN: the embedded relation's
        // columns stay unqualified and unambiguous, whatever the join table's columns are called.
        Some(junction) => {
            let j = format!("{alias}_j");
            sql.push_str(" WHERE EXISTS (SELECT 1 FROM ");
            push_qualified(sql, &junction.relation.name);
            sql.push_str(" AS ");
            sql.push_str(&j);
            let mut first = true;
            for (j_col, child_col) in &junction.to_child {
                sql.push_str(if first { " WHERE " } else { " AND " });
                first = false;
                pair(sql, &j, j_col, &alias, child_col);
            }
            for (parent_col, j_col) in &embed.join {
                sql.push_str(" AND ");
                pair(sql, &j, j_col, &parent, parent_col);
            }
            sql.push(')');
        }
    }
    for c in &embed.conditions {
        sql.push_str(" AND ");
        condition(c, sql, params);
    }
}

/// `GROUP BY` the level's other output columns when it selects an aggregate, as PostgREST does:
/// by their select-list positions (after `offset` leading entries) if given, else by expression.
pub(super) fn group_by(
    columns: &[OutputColumn],
    positions: Option<usize>,
    sql: &mut String,
    params: &mut Params,
) {
    if !columns.iter().any(|c| c.expr.is_aggregate()) {
        return;
    }
    let mut first = true;
    for (i, c) in columns.iter().filter(|c| c.is_output()).enumerate() {
        if c.expr.is_aggregate() || matches!(c.expr, Expr::Embed(_)) {
            continue;
        }
        sql.push_str(if first { " GROUP BY " } else { ", " });
        first = false;
        match positions {
            Some(offset) => push_count(sql, (offset + i + 1) as u64),
            None => expr(&c.expr, sql, params),
        }
    }
}

/// Writes a row count (LIMIT, OFFSET) as a literal. It is a number the parser already turned
/// into a `u64`, never request text, and as a literal it lets PostgreSQL plan for it: with
/// `LIMIT $1` the generic plan assumes 10% of the table, so PostgreSQL re-plans every execution
/// (measured: half the throughput of `LIMIT 10` on s000).
fn push_count(sql: &mut String, n: u64) {
    sql.push_str(itoa::Buffer::new().format(n));
}

/// `LIMIT` / `OFFSET` of a row window.
pub(super) fn window(w: RowWindow, sql: &mut String) {
    if let Some(limit) = w.limit {
        sql.push_str(" LIMIT ");
        push_count(sql, limit);
    }
    if w.offset > 0 {
        sql.push_str(" OFFSET ");
        push_count(sql, w.offset);
    }
}

pub(crate) fn order_by(order: &[OrderBy], sql: &mut String, params: &mut Params) {
    grouped_order_by(order, &[], None, sql, params);
}

/// `ORDER BY`; in a grouped level with select-list positions, a term that is one of the output
/// columns is written as its position, since the same expression with other parameter numbers
/// would not count as grouped.
pub(super) fn grouped_order_by(
    order: &[OrderBy],
    columns: &[OutputColumn],
    positions: Option<usize>,
    sql: &mut String,
    params: &mut Params,
) {
    let grouped = positions.is_some() && columns.iter().any(|c| c.expr.is_aggregate());
    let rendered = |e: &Expr| {
        let (mut text, mut p) = (String::new(), Params::default());
        expr(e, &mut text, &mut p);
        (text, p.0)
    };
    for (i, o) in order.iter().enumerate() {
        sql.push_str(if i == 0 { " ORDER BY " } else { ", " });
        let position = if grouped {
            let this = rendered(&o.expr);
            columns.iter().filter(|c| c.is_output()).position(|c| rendered(&c.expr) == this)
        } else {
            None
        };
        match (position, positions) {
            (Some(p), Some(offset)) => push_count(sql, (offset + p + 1) as u64),
            _ => expr(&o.expr, sql, params),
        }
        match o.term.direction {
            Some(Direction::Asc) => sql.push_str(" ASC"),
            Some(Direction::Desc) => sql.push_str(" DESC"),
            None => {}
        }
        match o.term.nulls {
            Some(NullsOrder::First) => sql.push_str(" NULLS FIRST"),
            Some(NullsOrder::Last) => sql.push_str(" NULLS LAST"),
            None => {}
        }
    }
}
