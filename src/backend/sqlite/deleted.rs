//! Whether a caller could read a row that is gone (realtime's question about a delete): its
//! `select` rules' filters, the caller's claims in them, evaluated on the deleted row's values
//! as SQLite would evaluate them — a comparison with NULL is neither true nor false, `not.`
//! keeps it so. What cannot be told here (a pattern, full-text search, a JSON path, a filter on
//! an embedded table, a value that is neither number nor text) is `None`: the caller may
//! then not be sent the delete.

use rowgate_request::{CompareOp, Filter, IsValue, LogicOp, LogicTree, Operation, QueryParams};
use serde_json::{Map, Value};

use super::rules::Access;

/// Whether a caller with `access` to the table (its claims `claims`, the token's JSON) could have
/// read `row`; `None` where it cannot be told.
pub fn could_read(access: &Access, claims: &str, row: &Map<String, Value>) -> Option<bool> {
    let entries = match access {
        Access::Denied => return Some(false),
        Access::All => return Some(true),
        Access::Rows(entries) => entries,
    };
    let claims: Map<String, Value> = serde_json::from_str(claims).unwrap_or_default();
    let mut unknown = false;
    for entry in entries {
        match keeps(entry, &claims, row) {
            Some(true) => return Some(true),
            Some(false) => {}
            None => unknown = true,
        }
    }
    (!unknown).then_some(false)
}

/// Whether one rule entry keeps the row: every top-level filter and logic tree is true. A claim
/// it names and the caller lacks keeps no row (as `bind_claims` decides for reads).
fn keeps(entry: &QueryParams, claims: &Map<String, Value>, row: &Map<String, Value>) -> Option<bool> {
    if super::rules::claims_named(entry).iter().any(|name| claims.get(name).is_none_or(Value::is_null)) {
        return Some(false);
    }
    let mut all = Some(true);
    for (path, filter) in &entry.filters {
        if !path.is_empty() {
            return None;
        }
        all = and(all, leaf(filter, claims, row)?);
    }
    for (path, tree) in &entry.logic {
        if !path.is_empty() {
            return None;
        }
        all = and(all, tree_value(tree, claims, row)?);
    }
    Some(all == Some(true))
}

/// A tree's SQL value: `Some(None)` is NULL; `None`, not told.
fn tree_value(
    tree: &LogicTree,
    claims: &Map<String, Value>,
    row: &Map<String, Value>,
) -> Option<Option<bool>> {
    match tree {
        LogicTree::Filter(f) => leaf(f, claims, row),
        LogicTree::Expr { negated, op, children } => {
            let mut value = Some(*op == LogicOp::And);
            for child in children {
                let v = tree_value(child, claims, row)?;
                value = match op {
                    LogicOp::And => and(value, v),
                    LogicOp::Or => or(value, v),
                };
            }
            Some(if *negated { value.map(|b| !b) } else { value })
        }
    }
}

fn and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// One filter's SQL value on the row (`Some(None)`: NULL; `None`: not told).
fn leaf(f: &Filter, claims: &Map<String, Value>, row: &Map<String, Value>) -> Option<Option<bool>> {
    if !f.field.json_path.is_empty() {
        return None;
    }
    let value = row.get(&f.field.name)?;
    // The entry's claims are all there (`keeps`).
    let bound = |v: &str| -> String {
        match v.strip_prefix("@jwt.").and_then(|name| claims.get(name)) {
            None => v.to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    };
    let held: Option<bool> = match &f.operation {
        Operation::Compare { op, quantifier: None, value: operand } => {
            let ordering = compare(value, &bound(operand))?;
            match op {
                CompareOp::Eq => ordering.map(|o| o.is_eq()),
                CompareOp::Neq => ordering.map(|o| o.is_ne()),
                CompareOp::Gt => ordering.map(|o| o.is_gt()),
                CompareOp::Gte => ordering.map(|o| o.is_ge()),
                CompareOp::Lt => ordering.map(|o| o.is_lt()),
                CompareOp::Lte => ordering.map(|o| o.is_le()),
                _ => return None,
            }
        }
        Operation::In(items) => {
            // True on a match; else NULL if the value is NULL; else false.
            let mut held = Some(false);
            for item in items {
                match compare(value, &bound(item))? {
                    Some(o) if o.is_eq() => {
                        held = Some(true);
                        break;
                    }
                    Some(_) => {}
                    None => held = None,
                }
            }
            held
        }
        Operation::Is(is) => Some(match is {
            IsValue::Null | IsValue::Unknown => value.is_null(),
            IsValue::NotNull => !value.is_null(),
            IsValue::True => truth(value) == Some(true),
            IsValue::False => truth(value) == Some(false),
        }),
        Operation::IsDistinct(operand) => Some(compare(value, &bound(operand))?.is_none_or(|o| o.is_ne())),
        _ => return None,
    };
    Some(if f.negated { held.map(|b| !b) } else { held })
}

/// The row's `value` against a filter's text, as realtime's filters compare them (numbers as
/// numbers, booleans as booleans, text by its bytes); `Some(None)` when the value is NULL;
/// `None` when it cannot be told (JSON's text here need not be the file's).
fn compare(value: &Value, operand: &str) -> Option<Option<std::cmp::Ordering>> {
    match value {
        Value::Null => Some(None),
        Value::Array(_) | Value::Object(_) => None,
        v => crate::realtime::compare_value(v, operand).map(Some),
    }
}

/// A value as `is.true` and `is.false` read it.
fn truth(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_f64().map(|f| f != 0.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::auth::Principal;
    use crate::backend::sqlite::rules::{Operation as Op, Rules};

    fn told(rules: &str, role: &str, claims: Value, row: Value) -> Option<bool> {
        let rules = Rules::parse(rules).expect("rules");
        let who = Principal {
            role: Arc::from(role),
            claims: Arc::from(claims.to_string()),
            anonymous: role == "anon",
        };
        let Value::Object(row) = row else { unreachable!() };
        could_read(&rules.access(&who, "notes", Op::Select), &who.claims, &row)
    }

    #[test]
    fn a_deleted_row_is_judged_by_the_rules_on_its_values() {
        let own = "[notes]\nselect = { authenticated = \"owner=eq.@jwt.sub\", anon = \"public=is.true\" }";
        let row = json!({"id": 1, "owner": "ann", "public": false, "n": 3});
        assert_eq!(told(own, "authenticated", json!({"sub": "ann"}), row.clone()), Some(true));
        assert_eq!(told(own, "authenticated", json!({"sub": "bob"}), row.clone()), Some(false));
        assert_eq!(
            told(own, "authenticated", json!({}), row.clone()),
            Some(false),
            "a claim missing keeps no row"
        );
        assert_eq!(told(own, "anon", json!({}), row.clone()), Some(false));
        assert_eq!(
            told(own, "editor", json!({"sub": "ann"}), row.clone()),
            Some(true),
            "editors are signed in"
        );
        let either = "[notes]\nselect = { everyone = \"or=(n.gt.2,owner.in.(x,y))\" }";
        assert_eq!(told(either, "anon", json!({}), row.clone()), Some(true));
        assert_eq!(told(either, "anon", json!({}), json!({"n": 1, "owner": "y"})), Some(true));
        assert_eq!(told(either, "anon", json!({}), json!({"n": 1, "owner": "z"})), Some(false));
        // NULL is neither kept nor kept by its negation.
        let negated = "[notes]\nselect = { everyone = \"owner=not.eq.ann\" }";
        assert_eq!(told(negated, "anon", json!({}), json!({"owner": null})), Some(false));
        assert_eq!(told(negated, "anon", json!({}), json!({"owner": "bob"})), Some(true));
        // What the row alone cannot tell.
        let pattern = "[notes]\nselect = { everyone = \"owner=like.a*\" }";
        assert_eq!(told(pattern, "anon", json!({}), row.clone()), None);
        assert_eq!(
            told("[notes]\nselect = { everyone = \"true\" }", "anon", json!({}), row.clone()),
            Some(true)
        );
        assert_eq!(told("[other]\nselect = { everyone = \"true\" }", "anon", json!({}), row), Some(false));
    }
}
