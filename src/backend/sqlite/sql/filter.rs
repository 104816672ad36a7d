//! Conditions in SQLite: filters, logic trees and `EXISTS` on embedded resources, every
//! operator as PostgREST defines it or refused (`like` as `GLOB`, `match` by rowgate's
//! `regexp`, full-text search by FTS5's `MATCH` where FTS5 can answer it).

use rowgate_request::{CompareOp, IsValue, LogicOp, Operation, Quantifier};

use super::read::{expr, related_rows};
use super::{fts5, unsupported, Ctx, Rendered};
use crate::plan::{Condition, Expr};
use crate::schema::ValueKind;

/// ` WHERE 1 AND <the table's rule> AND <conditions>`.
pub(super) fn where_clause(
    table: &str,
    conditions: &[Condition],
    sql: &mut String,
    params: &mut Ctx<'_>,
) -> Rendered {
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

pub(super) fn condition(c: &Condition, sql: &mut String, params: &mut Ctx<'_>) -> Rendered {
    match c {
        // (SQLite has no domains, so no value parsers.)
        Condition::Filter { expr: e, kind, filter, parse: _ } => {
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
            return Err(unsupported(format!("The operator {}({q})", op.name())));
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
                other => return Err(unsupported(format!("The operator {}", other.name()))),
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
