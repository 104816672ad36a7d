//! A collection's rules made into the access each backend enforces on every door: each rule
//! compiled by the filter compiler twice — for a visitor, whose `@request.auth.*` are empty
//! (so `@request.auth.id != ""` is false), and for a signed-in caller, whose claims are read
//! when the rule is applied (`@jwt.sub`) — and written in the access rules' language, which
//! SQLite's rules take and PostgreSQL's policies are written from.

use rowgate_request::{Filter as Leaf, IsValue, JsonKey, LogicOp, LogicTree, Operation};
use serde_json::Map;

use super::collection::Collection;
use super::compile::{self, Joins, RuleCaller, Scope};
use super::definition::{Definition, RULES};
use super::error::PbError;
use super::filter;
use crate::backend::collections::{Access, TableAccess};

/// What the rules of `d` (whose collection is `c`) let each caller do, or PocketBase's 400
/// naming each rule that cannot be enforced.
pub fn access(
    d: &Definition,
    c: &Collection,
    cache: &crate::schema::SchemaCache,
    refused: &'static str,
) -> Result<TableAccess, PbError> {
    let mut errors = Map::new();
    let mut compiled = Vec::with_capacity(RULES.len());
    for rule in RULES {
        match compile(d.rule(rule), c, cache) {
            Ok(classes) => compiled.push(classes),
            Err(e) => {
                let message = format!("Invalid rule. Raw error: {e}.");
                errors.insert(rule.into(), PbError::field("validation_invalid_rule", &message));
                compiled.push(None);
            }
        }
    }
    if !errors.is_empty() {
        return Err(PbError::invalid(refused, errors));
    }
    let mut each = compiled.into_iter();
    let mut next = || each.next().flatten();
    let (list, view) = (next(), next());
    // The REST API has one way to read: the rows either rule lets the caller see.
    let read = match (list, view) {
        (None, None) => None,
        (Some(one), None) | (None, Some(one)) => Some(one),
        (Some([lv, ls]), Some([vv, vs])) => Some([either(lv, vv), either(ls, vs)]),
    };
    Ok(TableAccess {
        select: written(read)?,
        insert: written(next())?,
        update: written(next())?,
        delete: written(next())?,
    })
}

/// A rule compiled for a visitor and for a signed-in caller; `None` for no rule.
fn compile(
    rule: Option<&str>,
    c: &Collection,
    cache: &crate::schema::SchemaCache,
) -> Result<Option<[Folded; 2]>, String> {
    let Some(text) = rule else { return Ok(None) };
    let Some(parsed) = filter::parse(text).map_err(|e| e.0)? else {
        return Ok(Some([Folded::True, Folded::True]));
    };
    let mut classes = [Folded::False, Folded::False];
    for (slot, caller) in classes.iter_mut().zip([RuleCaller::Visitor, RuleCaller::SignedIn]) {
        let scope = Scope { cache, superuser: true, claims: "{}", rule: Some(caller) };
        let mut joins = Joins::default();
        let tree = compile::filter(&parsed, c, &scope, &mut joins).map_err(|e| e.cause.to_string())?;
        if !joins.embeds.is_empty() {
            return Err("a rule through a relation (author.name) is not enforced yet".into());
        }
        *slot = fold(tree);
    }
    Ok(Some(classes))
}

/// A condition with its constant parts worked out.
#[derive(Debug, Clone)]
enum Folded {
    True,
    False,
    Tree(LogicTree),
}

fn fold(tree: LogicTree) -> Folded {
    let LogicTree::Expr { negated, op, children } = tree else { return Folded::Tree(tree) };
    let (absorbing, neutral) = match op {
        LogicOp::And => (false, true),
        LogicOp::Or => (true, false),
    };
    let mut kept = Vec::new();
    let mut result = None;
    for child in children {
        match fold(child) {
            Folded::True if absorbing => result = Some(true),
            Folded::False if !absorbing => result = Some(false),
            Folded::True | Folded::False => {}
            Folded::Tree(t) => kept.push(t),
        }
        if result.is_some() {
            break;
        }
    }
    let value = match (result, kept.len()) {
        (Some(v), _) => Some(v),
        (None, 0) => Some(neutral),
        _ => None,
    };
    match (value, negated) {
        (Some(v), negated) => {
            if v != negated {
                Folded::True
            } else {
                Folded::False
            }
        }
        (None, _) if kept.len() == 1 && !negated => Folded::Tree(kept.remove(0)),
        (None, _) => Folded::Tree(LogicTree::Expr { negated, op, children: kept }),
    }
}

fn either(a: Folded, b: Folded) -> Folded {
    match (a, b) {
        (Folded::True, _) | (_, Folded::True) => Folded::True,
        (Folded::False, other) | (other, Folded::False) => other,
        (Folded::Tree(a), Folded::Tree(b)) => {
            Folded::Tree(LogicTree::Expr { negated: false, op: LogicOp::Or, children: vec![a, b] })
        }
    }
}

/// A compiled rule as the backend's access.
fn written(classes: Option<[Folded; 2]>) -> Result<Access, PbError> {
    let Some([visitor, signed_in]) = classes else { return Ok(Access::Nobody) };
    let text = |f: Folded| -> Result<Option<String>, PbError> {
        match f {
            Folded::True => Ok(Some("true".into())),
            Folded::False => Ok(None),
            Folded::Tree(t) => Ok(Some(top(&t).map_err(PbError::bad_request)?)),
        }
    };
    Ok(match (text(visitor)?, text(signed_in)?) {
        (Some(v), Some(s)) if v == "true" && s == "true" => Access::Everyone,
        (None, None) => Access::Nobody,
        (visitor, signed_in) => Access::Rows { visitor, signed_in },
    })
}

/// A condition as a query string's logic tree (`and=(…)`, `or=(…)`).
fn top(tree: &LogicTree) -> Result<String, String> {
    match tree {
        LogicTree::Expr { negated: false, op, children } => {
            let parts = children.iter().map(item).collect::<Result<Vec<_>, _>>()?;
            let op = if *op == LogicOp::And { "and" } else { "or" };
            Ok(format!("{op}=({})", parts.join(",")))
        }
        other => Ok(format!("and=({})", item(other)?)),
    }
}

/// One condition as an item of a PostgREST logic tree (`title.eq."x"`, `or(…)`).
fn item(tree: &LogicTree) -> Result<String, String> {
    match tree {
        LogicTree::Expr { negated, op, children } => {
            let parts = children.iter().map(item).collect::<Result<Vec<_>, _>>()?;
            let op = match op {
                LogicOp::And => "and",
                LogicOp::Or => "or",
            };
            Ok(format!("{}{op}({})", if *negated { "not." } else { "" }, parts.join(",")))
        }
        LogicTree::Filter(leaf) => filter_item(leaf),
    }
}

fn filter_item(leaf: &Leaf) -> Result<String, String> {
    let mut field = name(&leaf.field.name)?;
    for step in &leaf.field.json_path {
        field.push_str(if step.as_text { "->>" } else { "->" });
        match &step.key {
            JsonKey::Key(k) => field.push_str(&name(k)?),
            JsonKey::Index(i) => field.push_str(&i.to_string()),
        }
    }
    let not = if leaf.negated { "not." } else { "" };
    let operation = match &leaf.operation {
        Operation::Compare { op, quantifier: None, value } => format!("{}.{}", op.name(), quoted(value)),
        Operation::Is(v) => format!(
            "is.{}",
            match v {
                IsValue::Null => "null",
                IsValue::NotNull => "not_null",
                IsValue::True => "true",
                IsValue::False => "false",
                IsValue::Unknown => "unknown",
            }
        ),
        _ => return Err("an operator rules do not take".into()),
    };
    Ok(format!("{field}.{not}{operation}"))
}

/// A name as the rules' language takes it: PocketBase's names are letters, digits and `_`.
fn name(text: &str) -> Result<String, String> {
    match !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        true => Ok(text.to_owned()),
        false => Err(format!("the name {text:?} in a rule")),
    }
}

/// A value in double quotes, its quotes and backslashes escaped, as PostgREST reads them —
/// then percent-encoded, since the rules' language is a query string (`&`, `%`, `+` and `;` in
/// a value would otherwise be read as the query string's own).
fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    percent_encoding::utf8_percent_encode(&out, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rowgate_request::CompareOp;

    fn tree(text: &str) -> LogicTree {
        let request = rowgate_request::parse(rowgate_request::Method::Get, "/t", text, &[]).expect("parses");
        request.query.logic.into_iter().next().expect("a tree").1
    }

    #[test]
    fn a_written_rule_reads_back_as_it_was() {
        for text in [
            "and=(owner.eq.@jwt.sub,or(title.ilike.\"*it's, \\\"quoted\\\"*\",views.gt.3))",
            "and=(meta->a->>b.not.eq.x,published.is.true)",
        ] {
            let once = top(&tree(text)).expect("written");
            assert_eq!(tree(&once), tree(text), "{once}");
        }
        // Values no query string holds as they are.
        let leaf = |value: &str| {
            LogicTree::Filter(Leaf {
                field: rowgate_request::Field { name: "body".into(), json_path: Vec::new() },
                negated: false,
                operation: Operation::Compare { op: CompareOp::Eq, quantifier: None, value: value.into() },
            })
        };
        let nasty = "1\"); DROP TABLE items; -- a&b=c%20+d;e,(x)\\ é";
        let t = LogicTree::Expr {
            negated: false,
            op: LogicOp::Or,
            children: vec![leaf(nasty), leaf("@jwt.sub")],
        };
        let written = top(&t).expect("written");
        assert_eq!(tree(&written), t, "{written}");
    }

    #[test]
    fn constant_parts_are_worked_out() {
        let t = |negated, op, children| LogicTree::Expr { negated, op, children };
        assert!(matches!(fold(t(false, LogicOp::And, vec![])), Folded::True));
        assert!(matches!(fold(t(false, LogicOp::Or, vec![])), Folded::False));
        assert!(matches!(fold(t(true, LogicOp::Or, vec![t(false, LogicOp::And, vec![])])), Folded::False));
        let leaf = tree("and=(a.eq.1)");
        assert!(matches!(
            fold(t(false, LogicOp::Or, vec![leaf, t(false, LogicOp::Or, vec![])])),
            Folded::Tree(_)
        ));
    }
}
