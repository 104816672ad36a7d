//! A read as one SQLite statement: the JSON body of the rows (objects built by SQLite, embedded
//! resources by correlated subqueries) and how many there are; a count beside it when asked.

use rowgate_request::{Direction, JsonKey, NullsOrder};

use super::filter::{condition, where_clause};
use super::{unsupported, Ctx, Rendered, RowRules};
use crate::backend::{push_ident, Statement};
use crate::error::{sqlstate, Error};
use crate::plan::{EmbedPlan, Expr, Media, OrderBy, OutputColumn, ReadPlan, RowWindow};
use crate::schema::ValueKind;

/// The statements of a read on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteRead {
    /// Returns one row: the body (a JSON array) and its number of rows.
    pub main: Statement,
    /// Returns one row: the number of rows the filters match, when counted.
    pub count: Option<Statement>,
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
    group_by(&plan.columns, &mut sql, &mut params)?;
    order_by(&plan.order, &mut sql, &mut params)?;
    window(plan.window, &mut sql)?;
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

/// ` FROM "name" AS pgrst_<depth>`.
pub(super) fn source(name: &str, depth: usize, sql: &mut String) {
    sql.push_str(" FROM ");
    push_ident(sql, name);
    sql.push_str(" AS pgrst_");
    sql.push_str(itoa::Buffer::new().format(depth));
}

/// `json_object(key, value, ...)` of the output columns; keys are parameters (they may be
/// aliases from the request).
pub(super) fn object(columns: &[OutputColumn], sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
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
        // (Not around an aggregate, which SQLite cannot take into a subquery.)
        (e, ValueKind::Numeric) if !matches!(e, Expr::Aggregate(..)) => {
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

pub(super) fn expr(e: &Expr, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
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
        Expr::Aggregate(agg, arg) => {
            use rowgate_request::Aggregate as A;
            sql.push_str(match agg {
                A::Count => "count(",
                A::Sum => "sum(",
                A::Avg => "avg(",
                A::Max => "max(",
                A::Min => "min(",
            });
            match arg {
                Some(arg) => expr(arg, sql, params)?,
                None => sql.push('*'),
            }
            sql.push(')');
        }
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
            window(embed.window, sql)?;
            sql.push_str(") AS pgrst_s)");
        }
        Expr::Computed { .. } => return Err(unsupported("A computed field")),
        // (SQLite has no domains: never planned.)
        Expr::Represented { .. } => return Err(unsupported("A domain representation")),
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
        group_by(&embed.columns, sql, params)?;
        order_by(&embed.order, sql, params)?;
        window(embed.window, sql)?;
        sql.push_str("))");
    } else {
        sql.push_str("(SELECT ");
        object(&embed.columns, sql, params)?;
        related_rows(embed, sql, params)?;
        group_by(&embed.columns, sql, params)?;
        sql.push_str(" LIMIT 1)");
    }
    Ok(())
}

/// `GROUP BY` the level's other output columns when it selects an aggregate, as PostgREST
/// does (by expression: the level's one SQL column is the JSON object).
fn group_by(columns: &[OutputColumn], sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    if !columns.iter().any(|c| c.expr.is_aggregate()) {
        return Ok(());
    }
    let mut first = true;
    for c in columns
        .iter()
        .filter(|c| c.is_output() && !c.expr.is_aggregate() && !matches!(c.expr, Expr::Embed(_)))
    {
        sql.push_str(if first { " GROUP BY " } else { ", " });
        first = false;
        expr(&c.expr, sql, params)?;
    }
    Ok(())
}

/// ` FROM <embedded relation> WHERE <join to the parent> AND <its conditions>`.
pub(super) fn related_rows(embed: &EmbedPlan, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
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

/// `ORDER BY` with PostgreSQL's placement of NULLs where the request names none (last when
/// ascending, first when descending), which is the opposite of SQLite's.
pub(super) fn order_by(order: &[OrderBy], sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
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

/// `LIMIT` / `OFFSET` (SQLite needs a LIMIT for an OFFSET: -1 is none). A count beyond a
/// 64-bit integer is PostgreSQL's 22003, as on PostgreSQL (SQLite would read it as a float).
fn window(w: RowWindow, sql: &mut String) -> Rendered {
    if w.limit.unwrap_or(0) > i64::MAX as u64 || w.offset > i64::MAX as u64 {
        return Err(Error::sql(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range", false));
    }
    match (w.limit, w.offset) {
        (Some(limit), _) => {
            sql.push_str(" LIMIT ");
            sql.push_str(itoa::Buffer::new().format(limit));
        }
        (None, 0) => return Ok(()),
        (None, _) => sql.push_str(" LIMIT -1"),
    }
    if w.offset > 0 {
        sql.push_str(" OFFSET ");
        sql.push_str(itoa::Buffer::new().format(w.offset));
    }
    Ok(())
}
