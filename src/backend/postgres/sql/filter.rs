//! A read's conditions as SQL: the `WHERE` clause, each filter's operator on its column (or
//! JSON path, or computed field), logic trees, and `in` lists as quoted array literals. Values
//! are always bound parameters.

use rowgate_request::{CompareOp, FtsOp, IsValue, LogicOp, Operation, Quantifier};

use super::read::{expr, related_rows};
use super::{push_qualified, Params};
use crate::plan::{Condition, Expr};
use crate::schema::{QualifiedName, ValueKind};

pub(crate) fn where_clause(conditions: &[Condition], sql: &mut String, params: &mut Params) {
    for (i, c) in conditions.iter().enumerate() {
        sql.push_str(if i == 0 { " WHERE " } else { " AND " });
        condition(c, sql, params);
    }
}

pub(crate) fn condition(c: &Condition, sql: &mut String, params: &mut Params) {
    match c {
        Condition::Filter { expr: e, kind, filter, parse } => {
            if filter.negated {
                sql.push_str("NOT ");
            }
            sql.push('(');
            operation(e, *kind, &filter.operation, parse.as_ref(), sql, params);
            sql.push(')');
        }
        Condition::Exists { embed, negated } => {
            sql.push_str(if *negated { "NOT EXISTS (SELECT 1" } else { "EXISTS (SELECT 1" });
            related_rows(embed, sql, params);
            sql.push(')');
        }
        Condition::Logic { negated, op, children } => {
            if *negated {
                sql.push_str("NOT ");
            }
            if children.is_empty() {
                // An empty AND holds, an empty OR does not.
                sql.push_str(if *op == LogicOp::And { "(true)" } else { "(false)" });
                return;
            }
            sql.push('(');
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    sql.push_str(match op {
                        LogicOp::And => " AND ",
                        LogicOp::Or => " OR ",
                    });
                }
                condition(child, sql, params);
            }
            sql.push(')');
        }
    }
}

/// `parse`, the function of a domain's data representation from `text`, reads the values of
/// comparisons and `in` (not of patterns), as in PostgREST.
fn operation(
    e: &Expr,
    kind: ValueKind,
    op: &Operation,
    parse: Option<&QualifiedName>,
    sql: &mut String,
    params: &mut Params,
) {
    let call = |sql: &mut String, f: &QualifiedName| {
        push_qualified(sql, f);
        sql.push('(');
    };
    match op {
        Operation::Compare { op, quantifier, value } => {
            expr(e, sql, params);
            sql.push(' ');
            sql.push_str(compare_sql(*op));
            sql.push(' ');
            let pattern = matches!(op, CompareOp::Like | CompareOp::Ilike);
            let value = if pattern { value.replace('*', "%") } else { value.clone() };
            let parse = parse.filter(|_| !pattern);
            if let Some(q) = quantifier {
                sql.push_str(match q {
                    Quantifier::Any => "ANY(",
                    Quantifier::All => "ALL(",
                });
            }
            match parse {
                Some(f) => {
                    call(sql, f);
                    params.push(sql, value);
                    sql.push_str("::text)");
                }
                None => params.push(sql, value),
            }
            if quantifier.is_some() {
                sql.push(')');
            }
        }
        Operation::In(items) => {
            expr(e, sql, params);
            sql.push_str(" = ANY(");
            match parse {
                // Each item read by the parser, as PostgREST does: `= ANY (SELECT f(unnest(...)))`.
                Some(f) => {
                    sql.push_str("SELECT ");
                    call(sql, f);
                    sql.push_str("pg_catalog.unnest(");
                    params.push(sql, array_literal(items));
                    sql.push_str("::text[]))");
                }
                None => params.push(sql, array_literal(items)),
            }
            sql.push(')');
        }
        Operation::Is(v) => {
            expr(e, sql, params);
            sql.push_str(match v {
                IsValue::Null => " IS NULL",
                IsValue::NotNull => " IS NOT NULL",
                IsValue::True => " IS TRUE",
                IsValue::False => " IS FALSE",
                IsValue::Unknown => " IS UNKNOWN",
            });
        }
        Operation::IsDistinct(value) => {
            expr(e, sql, params);
            sql.push_str(" IS DISTINCT FROM ");
            params.push(sql, value.clone());
        }
        Operation::Fts { op, language, value } => {
            let lang = |sql: &mut String, params: &mut Params| {
                if let Some(l) = language {
                    params.push(sql, l.clone());
                    sql.push_str("::regconfig, ");
                }
            };
            // As PostgREST 13: a column (or JSON path) of any type but tsvector is searched
            // through `to_tsvector` (text, json and jsonb have one; other types fail in
            // PostgreSQL as they do under PostgREST); a computed field's value as it is.
            let searched_as_is =
                kind == ValueKind::TsVector || !matches!(e, Expr::Column(_) | Expr::JsonPath { .. });
            if searched_as_is {
                expr(e, sql, params);
            } else {
                sql.push_str("to_tsvector(");
                lang(sql, params);
                expr(e, sql, params);
                sql.push(')');
            }
            sql.push_str(" @@ ");
            sql.push_str(match op {
                FtsOp::Fts => "to_tsquery(",
                FtsOp::Plain => "plainto_tsquery(",
                FtsOp::Phrase => "phraseto_tsquery(",
                FtsOp::Websearch => "websearch_to_tsquery(",
            });
            lang(sql, params);
            params.push(sql, value.clone());
            sql.push(')');
        }
    }
}

fn compare_sql(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Eq => "=",
        CompareOp::Neq => "<>",
        CompareOp::Gt => ">",
        CompareOp::Gte => ">=",
        CompareOp::Lt => "<",
        CompareOp::Lte => "<=",
        CompareOp::Like => "LIKE",
        CompareOp::Ilike => "ILIKE",
        CompareOp::Match => "~",
        CompareOp::Imatch => "~*",
        CompareOp::Contains => "@>",
        CompareOp::Contained => "<@",
        CompareOp::Overlap => "&&",
        CompareOp::StrictlyLeft => "<<",
        CompareOp::StrictlyRight => ">>",
        CompareOp::NotExtendRight => "&<",
        CompareOp::NotExtendLeft => "&>",
        CompareOp::Adjacent => "-|-",
    }
}

/// A PostgreSQL array literal of the `in.(...)` items, each quoted so commas, quotes,
/// backslashes, braces and the word NULL stay literal text.
pub(super) fn array_literal(items: &[String]) -> String {
    let mut out = String::from("{");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        for c in item.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_items_stay_literal() {
        let items = vec!["a,b".to_string(), "say \"hi\"".into(), "back\\slash".into(), "NULL".into()];
        assert_eq!(array_literal(&items), r#"{"a,b","say \"hi\"","back\\slash","NULL"}"#);
        assert_eq!(array_literal(&[]), "{}");
    }
}
