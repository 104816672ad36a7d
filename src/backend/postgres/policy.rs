//! A condition in the access rules' language (PostgREST filters on a table's own columns,
//! `@jwt.<claim>` for the caller's claim: docs/sqlite.md#access-rules) written as the SQL of a
//! row-level security policy. A policy is DDL and takes no parameters, so each value is written
//! as an escaped string literal (`E'…'`, safe whatever `standard_conforming_strings` says),
//! which PostgreSQL converts to the column's type; a claim is read from `request.jwt.claims`,
//! as PostgREST sets it, and is null for a caller without it (so no row), as in the rules.

use rowgate_request::{CompareOp, Filter, IsValue, JsonKey, LogicOp, LogicTree, Operation};

use crate::backend::push_ident;

/// The SQL of `rules` (one condition of the rules' language, not `"true"`).
pub fn condition(rules: &str) -> Result<String, String> {
    if rules == "true" {
        return Ok("true".into());
    }
    let request = rowgate_request::parse(rowgate_request::Method::Get, "/rule", rules, &[])
        .map_err(|e| format!("{rules:?}: {e}"))?;
    let q = request.query;
    let top_level = q.filters.iter().all(|(p, _)| p.is_empty()) && q.logic.iter().all(|(p, _)| p.is_empty());
    if !top_level || !q.order.is_empty() || !q.ranges.is_empty() || q.columns.is_some() {
        return Err(format!("{rules:?}: a rule may only hold filters on the table's own columns"));
    }
    let mut terms = Vec::new();
    for (_, f) in &q.filters {
        terms.push(leaf(f)?);
    }
    for (_, t) in &q.logic {
        terms.push(tree(t)?);
    }
    match terms.is_empty() {
        true => Err(format!("{rules:?}: no filter")),
        false => Ok(terms.join(" AND ")),
    }
}

fn tree(t: &LogicTree) -> Result<String, String> {
    match t {
        LogicTree::Filter(f) => leaf(f),
        LogicTree::Expr { negated, op, children } => {
            let (joint, empty) = match op {
                LogicOp::And => (" AND ", "true"),
                LogicOp::Or => (" OR ", "false"),
            };
            let parts = children.iter().map(tree).collect::<Result<Vec<_>, _>>()?;
            let inner = if parts.is_empty() { empty.to_owned() } else { parts.join(joint) };
            Ok(match negated {
                true => format!("NOT ({inner})"),
                false => format!("({inner})"),
            })
        }
    }
}

fn leaf(f: &Filter) -> Result<String, String> {
    let mut column = String::new();
    push_ident(&mut column, &f.field.name);
    for step in &f.field.json_path {
        column.push_str(if step.as_text { " ->> " } else { " -> " });
        match &step.key {
            JsonKey::Key(k) => column.push_str(&literal(k)),
            JsonKey::Index(i) => column.push_str(&i.to_string()),
        }
    }
    let test = match &f.operation {
        Operation::Compare { op, quantifier: None, value } => {
            let (sign, value) = match op {
                CompareOp::Eq => ("=", value_of(value)?),
                CompareOp::Neq => ("<>", value_of(value)?),
                CompareOp::Gt => (">", value_of(value)?),
                CompareOp::Gte => (">=", value_of(value)?),
                CompareOp::Lt => ("<", value_of(value)?),
                CompareOp::Lte => ("<=", value_of(value)?),
                CompareOp::Like if !is_claim(value) => ("LIKE", literal(&value.replace('*', "%"))),
                CompareOp::Ilike if !is_claim(value) => ("ILIKE", literal(&value.replace('*', "%"))),
                _ => return Err(format!("{op:?} is not written as a policy")),
            };
            format!("{column} {sign} {value}")
        }
        Operation::Is(v) => format!(
            "{column} IS {}",
            match v {
                IsValue::Null => "NULL",
                IsValue::NotNull => "NOT NULL",
                IsValue::True => "TRUE",
                IsValue::False => "FALSE",
                IsValue::Unknown => "UNKNOWN",
            }
        ),
        Operation::In(items) => {
            let items = items.iter().map(|i| value_of(i)).collect::<Result<Vec<_>, _>>()?;
            format!("{column} IN ({})", items.join(", "))
        }
        Operation::IsDistinct(v) => format!("{column} IS DISTINCT FROM {}", value_of(v)?),
        _ => return Err("an operator that is not written as a policy".into()),
    };
    Ok(match f.negated {
        true => format!("NOT ({test})"),
        false => format!("({test})"),
    })
}

fn is_claim(value: &str) -> bool {
    value.starts_with("@jwt.")
}

/// A value: the caller's claim for `@jwt.<claim>`, else the text as a literal.
fn value_of(value: &str) -> Result<String, String> {
    match value.strip_prefix("@jwt.") {
        Some(claim) if !claim.is_empty() && claim.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            Ok(format!("(current_setting('request.jwt.claims', true)::jsonb ->> {})", literal(claim)))
        }
        Some(claim) => Err(format!("the claim {claim:?} is not a name")),
        None => Ok(literal(value)),
    }
}

/// `text` as an escaped string literal.
pub fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 3);
    out.push_str("E'");
    for c in text.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_written_as_a_policy_with_its_values_escaped() {
        assert_eq!(
            condition("or=(owner.eq.@jwt.sub,and(published.is.true,title.ilike.*it's\\\\*))").as_deref(),
            Ok("((\"owner\" = (current_setting('request.jwt.claims', true)::jsonb ->> E'sub')) OR ((\"published\" IS TRUE) AND (\"title\" ILIKE E'%it''s\\\\\\\\%')))")
        );
        assert_eq!(condition("views=gt.3").as_deref(), Ok("(\"views\" > E'3')"));
        assert!(condition("owner=eq.@jwt.a'b").is_err());
    }
}
