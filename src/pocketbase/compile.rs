//! A PocketBase filter or sort, resolved against a collection and compiled to the API's own
//! filters and order terms (`rowgate_request`), which each backend renders with its values
//! bound: nothing of the filter's text reaches SQL but names the collection has. A comparison
//! through a relation (`author.name = 'ann'`) becomes an empty embed of the related collection
//! holding the comparison, and the row's test whether it has such a related row ([`Joins`]).

use chrono::{Datelike, Duration, NaiveDateTime, NaiveTime, Timelike, Utc};
use rowgate_request::{
    CompareOp, Direction, Embed, EmbedPath, Field as Column, Filter as Leaf, IsValue, JsonKey, JsonStep,
    LogicOp, LogicTree, NullsOrder, Operation, OrderTerm, SelectItem,
};

use super::collection::{format_date, Collection, FieldKind, Link};
use super::error::PbError;
use super::filter::{Filter, Operand, SignOp};

/// What the filter may refer to beside the collection's fields.
pub struct Scope<'a> {
    /// The schema cache, where related collections are found.
    pub cache: &'a crate::schema::SchemaCache,
    /// The caller is a superuser, who alone may name `@request.*` in a filter.
    pub superuser: bool,
    /// The caller's claims (`@request.auth.id` is `sub`).
    pub claims: &'a str,
    /// Compiling a collection's rule for this kind of caller, rather than a request's filter:
    /// `@request.auth.*` stands for the claims of whoever asks (`@jwt.<claim>` values), a
    /// visitor's are empty.
    pub rule: Option<RuleCaller>,
}

/// Who a rule is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleCaller {
    /// A visitor: no claims.
    Visitor,
    /// A signed-in caller: its claims, read when the rule is applied.
    SignedIn,
}

/// The embeds a filter's relation paths need, each with the conditions at its path.
#[derive(Default)]
pub struct Joins {
    /// Empty embeds to add to the top level's `select`.
    pub embeds: Vec<SelectItem>,
    /// The conditions inside them, by embed path.
    pub logic: Vec<(EmbedPath, LogicTree)>,
}

impl Joins {
    fn alias(&self) -> String {
        format!("pb_join_{}", self.logic.len())
    }

    /// Puts `embed` into the select list of the embed at `path` (the top level when empty).
    fn add(&mut self, path: &[String], embed: Embed) {
        let mut items = &mut self.embeds;
        for alias in path {
            let Some(SelectItem::Embed(inner)) = items
                .iter_mut()
                .find(|i| matches!(i, SelectItem::Embed(e) if e.alias.as_deref() == Some(alias)))
            else {
                return;
            };
            items = &mut inner.select;
        }
        items.push(SelectItem::Embed(embed));
    }
}

/// An operand resolved: a column, or a value.
enum Resolved {
    Column { field: Column, kind: FieldKind },
    Value(Value),
}

#[derive(Clone)]
enum Value {
    Text(String),
    Number(String),
    Bool(bool),
    Null,
    /// A claim of whoever asks, named in a rule (`sub` for `@request.auth.id`).
    Claim(String),
}

impl Value {
    /// `null` or `''`, which PocketBase's `=` and `!=` take as one.
    fn is_blank(&self) -> bool {
        matches!(self, Value::Null) || matches!(self, Value::Text(t) if t.is_empty())
    }

    fn text(&self) -> String {
        match self {
            Value::Text(t) | Value::Number(t) => t.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
            Value::Claim(name) => format!("@jwt.{name}"),
        }
    }
}

/// `filter` as the API's logic tree over `collection`, the embeds its relation paths need
/// added to `joins`.
pub fn filter(
    filter: &Filter,
    collection: &Collection,
    scope: &Scope<'_>,
    joins: &mut Joins,
) -> Result<LogicTree, PbError> {
    match filter {
        Filter::All(terms) | Filter::Any(terms) => Ok(LogicTree::Expr {
            negated: false,
            op: if matches!(filter, Filter::All(_)) { LogicOp::And } else { LogicOp::Or },
            children: terms
                .iter()
                .map(|t| self::filter(t, collection, scope, joins))
                .collect::<Result<_, _>>()?,
        }),
        Filter::Compare { left, sign, right } => {
            if let Some(related) = through_relation(left, right, sign.op, collection, scope, joins)? {
                return Ok(related);
            }
            let left = resolve(left, collection, scope)?;
            let right = resolve(right, collection, scope)?;
            match (left, right) {
                (Resolved::Column { field, kind }, Resolved::Value(v)) => {
                    claim_compared(kind, sign.op, &v)?;
                    Ok(compare(field, kind, sign.op, v))
                }
                // `3 = views`: the same comparison turned around, where it can be.
                (Resolved::Value(v), Resolved::Column { field, kind }) => match mirrored(sign.op) {
                    Some(op) => {
                        claim_compared(kind, op, &v)?;
                        Ok(compare(field, kind, op, v))
                    }
                    None => Err(unsupported("a pattern on the left of ~")),
                },
                // A signed-in caller's claim is there (`@request.auth.id != ""` holds); what it
                // is otherwise is known only when the rule is applied.
                (Resolved::Value(a), Resolved::Value(b)) => match (&a, &b) {
                    (Value::Claim(_), other) | (other, Value::Claim(_)) => {
                        match (sign.op, other.is_blank()) {
                            (SignOp::Eq, true) => Ok(constant(SignOp::Neq, &Value::Null, &Value::Null)),
                            (SignOp::Neq, true) => Ok(constant(SignOp::Eq, &Value::Null, &Value::Null)),
                            _ => Err(unsupported("a comparison of @request.auth with a value")),
                        }
                    }
                    _ => Ok(constant(sign.op, &a, &b)),
                },
                (Resolved::Column { .. }, Resolved::Column { .. }) => {
                    Err(unsupported("a comparison of two fields"))
                }
            }
        }
    }
}

/// `rel.field op value` (or `value op rel.field`, or deeper: `post.author.name`): whether the
/// row has a related row the comparison holds for — or, for `!=`, `!~` and `= null`, has none
/// it fails for, as PocketBase's join leaves a row without one in. `None` when neither operand
/// is such a path.
fn through_relation(
    left: &Operand,
    right: &Operand,
    op: SignOp,
    c: &Collection,
    scope: &Scope<'_>,
    joins: &mut Joins,
) -> Result<Option<LogicTree>, PbError> {
    let related = |o: &Operand| match o {
        Operand::Identifier(name) => name
            .split_once('.')
            .filter(|(first, _)| c.field(first).is_some_and(|f| f.relation.is_some()))
            .map(|(first, rest)| (first.to_owned(), rest.to_owned())),
        _ => None,
    };
    let (path, value, op) = match (related(left), related(right)) {
        (Some(path), None) => (path, right, op),
        (None, Some(path)) => match mirrored(op) {
            Some(op) => (path, left, op),
            None => return Err(unsupported("a pattern on the left of ~")),
        },
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => return Err(unsupported("a comparison of two fields")),
    };
    let Resolved::Value(value) = resolve(value, c, scope)? else {
        return Err(unsupported("a comparison of two fields"));
    };
    let (first, rest) = path;
    let Some(link) = c.field(&first).and_then(|f| f.relation.as_ref()) else { return Ok(None) };
    relation_leaf(link, &rest, op, value, c, scope, joins, &[]).map(Some)
}

/// The existence test of a related row of `link` (embedded below `at`) for which `rest op
/// value` holds, its embed and condition added to `joins`.
#[allow(clippy::too_many_arguments)]
fn relation_leaf(
    link: &Link,
    rest: &str,
    op: SignOp,
    value: Value,
    c: &Collection,
    scope: &Scope<'_>,
    joins: &mut Joins,
    at: &[String],
) -> Result<LogicTree, PbError> {
    let target = Collection::find(scope.cache, &c.relation.name.schema, &link.collection)
        .ok_or_else(|| PbError::bad_request(format!("{} is not a collection", link.collection)))?;
    // PocketBase joins the related row, null when there is none: a row without one passes
    // `!=` (which holds of null) and `= null`, as a row that has no related row failing them.
    let (none, op) = match (op, value.is_blank()) {
        (SignOp::Neq, true) => (false, SignOp::Neq),
        (SignOp::Eq, true) => (true, SignOp::Neq),
        (SignOp::Neq, false) => (true, SignOp::Eq),
        (op, _) => (false, op),
    };
    let alias = joins.alias();
    let path: Vec<String> = at.iter().cloned().chain([alias.clone()]).collect();
    joins.add(
        at,
        Embed {
            name: target.name().to_owned(),
            alias: Some(alias.clone()),
            hint: Some(link.constraint.clone()),
            join: None,
            spread: false,
            select: Vec::new(),
        },
    );
    // Reserved before the nested ones so that aliases stay unique.
    joins
        .logic
        .push((path.clone(), LogicTree::Expr { negated: false, op: LogicOp::And, children: Vec::new() }));
    let at_index = joins.logic.len() - 1;
    let nested = rest
        .split_once('.')
        .and_then(|(first, deeper)| Some((target.field(first)?.relation.as_ref()?, deeper)));
    let inner = match nested {
        Some((next, deeper)) => relation_leaf(next, deeper, op, value, &target, scope, joins, &path)?,
        None => match column(rest, &target)? {
            Resolved::Column { field, kind } => compare(field, kind, op, value),
            Resolved::Value(_) => return Err(unsupported("a value through a relation")),
        },
    };
    joins.logic[at_index].1 = inner;
    let exists = if none { IsValue::Null } else { IsValue::NotNull };
    Ok(LogicTree::Filter(Leaf {
        field: Column { name: alias, json_path: Vec::new() },
        negated: false,
        operation: Operation::Is(exists),
    }))
}

/// `sort=`: comma-separated fields, each `-` for descending (`+` or nothing ascending), a field
/// of a related record through its relation field (`author.name`: the related record embedded
/// in `joins`). Nulls sort as SQLite sorts them, where PocketBase runs: first ascending, last
/// descending.
pub fn sort(
    text: &str,
    collection: &Collection,
    scope: &Scope<'_>,
    joins: &mut Joins,
) -> Result<Vec<OrderTerm>, PbError> {
    text.split(',')
        .map(|term| {
            let term = term.trim();
            let (direction, nulls, name) = match term.strip_prefix('-') {
                Some(name) => (Direction::Desc, NullsOrder::Last, name),
                None => (Direction::Asc, NullsOrder::First, term.strip_prefix('+').unwrap_or(term)),
            };
            let related = name
                .split_once('.')
                .and_then(|(first, rest)| Some((collection.field(first)?.relation.as_ref()?, rest)));
            let (field, relation) = match related {
                Some((link, rest)) => {
                    let target =
                        Collection::find(scope.cache, &collection.relation.name.schema, &link.collection)
                            .ok_or_else(|| {
                                PbError::bad_request(format!("{} is not a collection", link.collection))
                            })?;
                    let Resolved::Column { field, .. } = column(rest, &target)? else {
                        return Err(PbError::bad_request(format!("cannot sort by {name}")));
                    };
                    let alias = format!("pb_sort_{}", joins.embeds.len());
                    let select = vec![SelectItem::Field {
                        field: Column { name: field.name.clone(), json_path: Vec::new() },
                        alias: None,
                        cast: None,
                        aggregate: None,
                        aggregate_cast: None,
                    }];
                    joins.embeds.push(SelectItem::Embed(Embed {
                        name: target.name().to_owned(),
                        alias: Some(alias.clone()),
                        hint: Some(link.constraint.clone()),
                        join: None,
                        spread: false,
                        select,
                    }));
                    (field, Some(alias))
                }
                None => match column(name, collection)? {
                    Resolved::Column { field, .. } => (field, None),
                    Resolved::Value(_) => return Err(PbError::bad_request(format!("cannot sort by {name}"))),
                },
            };
            Ok(OrderTerm { field, relation, direction: Some(direction), nulls: Some(nulls) })
        })
        .collect()
}

fn resolve(operand: &Operand, collection: &Collection, scope: &Scope<'_>) -> Result<Resolved, PbError> {
    match operand {
        // In a rule, such a text would be read as a caller's claim.
        Operand::Text(t) if scope.rule.is_some() && t.starts_with("@jwt.") => {
            Err(unsupported("a text that starts with @jwt. in a rule"))
        }
        Operand::Text(t) => Ok(Resolved::Value(Value::Text(t.clone()))),
        Operand::Number(n) => Ok(Resolved::Value(Value::Number(n.clone()))),
        Operand::Function { name, .. } => Err(unsupported(&format!("the function {name}"))),
        Operand::Identifier(name) => match name.as_str() {
            "true" => Ok(Resolved::Value(Value::Bool(true))),
            "false" => Ok(Resolved::Value(Value::Bool(false))),
            "null" => Ok(Resolved::Value(Value::Null)),
            _ if name.starts_with("@request.") => request(name, scope).map(Resolved::Value),
            // A rule is compiled once and kept: a time in it would stay the time it was made.
            _ if name.starts_with('@') && scope.rule.is_some() => {
                Err(unsupported(&format!("{name} in a rule")))
            }
            _ if name.starts_with('@') => macro_value(name, Utc::now().naive_utc()).map(Resolved::Value),
            _ => column(name, collection),
        },
    }
}

/// A field, or a key within a `json` field (`meta.a.b`).
fn column(name: &str, collection: &Collection) -> Result<Resolved, PbError> {
    if name.contains(':') {
        return Err(unsupported(&format!("the modifier of {name}")));
    }
    let mut path = name.split('.');
    let first = path.next().unwrap_or_default();
    let field =
        collection.field(first).ok_or_else(|| PbError::bad_request(format!("unknown field {first}")))?;
    let steps: Vec<&str> = path.collect();
    if !steps.is_empty() && field.kind != FieldKind::Json {
        return Err(unsupported(&format!("the path {name}")));
    }
    let count = steps.len();
    let json_path = steps
        .into_iter()
        .enumerate()
        .map(|(i, key)| JsonStep {
            as_text: i + 1 == count,
            key: match key.parse::<i64>() {
                Ok(index) => JsonKey::Index(index),
                Err(_) => JsonKey::Key(key.to_owned()),
            },
        })
        .collect::<Vec<_>>();
    let kind = if json_path.is_empty() { field.kind } else { FieldKind::Text };
    Ok(Resolved::Column { field: Column { name: field.name.clone(), json_path }, kind })
}

/// `@request.auth.id` and the rest, which only a superuser may name in a filter.
fn request(name: &str, scope: &Scope<'_>) -> Result<Value, PbError> {
    if let Some(caller) = scope.rule {
        let claim = match name {
            "@request.auth.id" => "sub",
            "@request.auth.email" => "email",
            _ => return Err(unsupported(&format!("{name} in a rule"))),
        };
        return Ok(match caller {
            RuleCaller::Visitor => Value::Null,
            RuleCaller::SignedIn => Value::Claim(claim.into()),
        });
    }
    if !scope.superuser {
        return Err(PbError::forbidden("Only superusers can filter by @request."));
    }
    let claims: serde_json::Value = serde_json::from_str(scope.claims).unwrap_or_default();
    let claim = match name {
        "@request.auth.id" => claims.get("sub"),
        "@request.auth.email" => claims.get("email"),
        _ => None,
    };
    Ok(match claim {
        Some(serde_json::Value::String(s)) => Value::Text(s.clone()),
        _ => Value::Null,
    })
}

/// PocketBase's date macros, in UTC.
fn macro_value(name: &str, now: NaiveDateTime) -> Result<Value, PbError> {
    let day_start = now.date().and_time(NaiveTime::MIN);
    let day_end = now.date().and_hms_milli_opt(23, 59, 59, 999).unwrap_or(now);
    let month_start = now.date().with_day(1).unwrap_or(now.date()).and_time(NaiveTime::MIN);
    let next_month = if now.month() == 12 {
        month_start.with_year(now.year() + 1).and_then(|d| d.with_month(1))
    } else {
        month_start.with_month(now.month() + 1)
    };
    let year_start = month_start.with_month(1).unwrap_or(month_start);
    let date = |t: NaiveDateTime| Value::Text(format_date(t));
    let number = |n: u32| Value::Number(n.to_string());
    Ok(match name {
        "@now" => date(now),
        "@yesterday" => date(now - Duration::days(1)),
        "@tomorrow" => date(now + Duration::days(1)),
        "@todayStart" => date(day_start),
        "@todayEnd" => date(day_end),
        "@monthStart" => date(month_start),
        "@monthEnd" => date(next_month.map_or(day_end, |m| m - Duration::milliseconds(1))),
        "@yearStart" => date(year_start),
        "@yearEnd" => {
            date(year_start.with_year(now.year() + 1).map_or(day_end, |y| y - Duration::milliseconds(1)))
        }
        "@second" => number(now.second()),
        "@minute" => number(now.minute()),
        "@hour" => number(now.hour()),
        "@day" => number(now.day()),
        "@month" => number(now.month()),
        "@year" => number(now.year().max(0) as u32),
        "@weekday" => number(now.weekday().num_days_from_sunday()),
        _ => return Err(unsupported(name)),
    })
}

/// One comparison of a column with a value, as PocketBase means it: `=` and `!=` treat null
/// as a value (`IS`, `IS NOT`), and a text's null is also its empty text; `~` is a
/// case-insensitive `LIKE` that wraps a pattern without `%` in `%…%`.
fn compare(field: Column, kind: FieldKind, op: SignOp, value: Value) -> LogicTree {
    let leaf = |negated, operation| LogicTree::Filter(Leaf { field: field.clone(), negated, operation });
    let cmp = |op, value: String| Operation::Compare { op, quantifier: None, value };
    let any = |children| LogicTree::Expr { negated: false, op: LogicOp::Or, children };
    let blank = matches!(kind, FieldKind::Text | FieldKind::Date);
    let value = match value {
        Value::Text(t) if t.is_empty() && blank => Value::Null,
        v => v,
    };
    match (op, value) {
        (SignOp::Eq, Value::Null) if blank => any(vec![
            leaf(false, Operation::Is(IsValue::Null)),
            leaf(false, cmp(CompareOp::Eq, String::new())),
        ]),
        (SignOp::Eq, Value::Null) => leaf(false, Operation::Is(IsValue::Null)),
        (SignOp::Neq, Value::Null) if blank => LogicTree::Expr {
            negated: false,
            op: LogicOp::And,
            children: vec![
                leaf(false, Operation::Is(IsValue::NotNull)),
                leaf(false, cmp(CompareOp::Neq, String::new())),
            ],
        },
        (SignOp::Neq, Value::Null) => leaf(false, Operation::Is(IsValue::NotNull)),
        (SignOp::Eq, v) => leaf(false, cmp(CompareOp::Eq, v.text())),
        (SignOp::Neq, v) => {
            any(vec![leaf(false, Operation::Is(IsValue::Null)), leaf(false, cmp(CompareOp::Neq, v.text()))])
        }
        (SignOp::Like | SignOp::NotLike, v) => {
            let text = v.text();
            let pattern = if text.contains('%') { text } else { format!("%{text}%") };
            leaf(op == SignOp::NotLike, cmp(CompareOp::Ilike, pattern.replace('%', "*")))
        }
        (SignOp::Lt, v) => leaf(false, cmp(CompareOp::Lt, v.text())),
        (SignOp::Lte, v) => leaf(false, cmp(CompareOp::Lte, v.text())),
        (SignOp::Gt, v) => leaf(false, cmp(CompareOp::Gt, v.text())),
        (SignOp::Gte, v) => leaf(false, cmp(CompareOp::Gte, v.text())),
    }
}

/// A claim is compared with a text field, as it is: never as a pattern (a caller could choose
/// one that matches every row), nor as a number.
fn claim_compared(kind: FieldKind, op: SignOp, value: &Value) -> Result<(), PbError> {
    match value {
        Value::Claim(_) if !matches!(op, SignOp::Eq | SignOp::Neq) => {
            Err(unsupported("@request.auth with ~, <, >"))
        }
        Value::Claim(_) if kind != FieldKind::Text => {
            Err(unsupported("@request.auth compared with a field that is not text"))
        }
        _ => Ok(()),
    }
}

fn mirrored(op: SignOp) -> Option<SignOp> {
    Some(match op {
        SignOp::Eq | SignOp::Neq => op,
        SignOp::Lt => SignOp::Gt,
        SignOp::Lte => SignOp::Gte,
        SignOp::Gt => SignOp::Lt,
        SignOp::Gte => SignOp::Lte,
        SignOp::Like | SignOp::NotLike => return None,
    })
}

/// Two values compared: an empty `and` (true) or `or` (false).
fn constant(op: SignOp, a: &Value, b: &Value) -> LogicTree {
    let (x, y) = (a.text(), b.text());
    let numbers = x.parse::<f64>().ok().zip(y.parse::<f64>().ok());
    let holds = match (op, numbers) {
        (SignOp::Eq, Some((x, y))) => x == y,
        (SignOp::Neq, Some((x, y))) => x != y,
        (SignOp::Lt, Some((x, y))) => x < y,
        (SignOp::Lte, Some((x, y))) => x <= y,
        (SignOp::Gt, Some((x, y))) => x > y,
        (SignOp::Gte, Some((x, y))) => x >= y,
        (SignOp::Eq, None) => x == y,
        (SignOp::Neq, None) => x != y,
        (SignOp::Lt, None) => x < y,
        (SignOp::Lte, None) => x <= y,
        (SignOp::Gt, None) => x > y,
        (SignOp::Gte, None) => x >= y,
        (SignOp::Like, _) => x.to_lowercase().contains(&y.trim_matches('%').to_lowercase()),
        (SignOp::NotLike, _) => !x.to_lowercase().contains(&y.trim_matches('%').to_lowercase()),
    };
    LogicTree::Expr {
        negated: false,
        op: if holds { LogicOp::And } else { LogicOp::Or },
        children: Vec::new(),
    }
}

fn unsupported(what: &str) -> PbError {
    PbError::bad_request(format!("{what} is not supported in filters yet"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(macro_name: &str, now: &str) -> String {
        let now = NaiveDateTime::parse_from_str(now, "%Y-%m-%d %H:%M:%S").expect("a time");
        match macro_value(macro_name, now) {
            Ok(Value::Text(t) | Value::Number(t)) => t,
            _ => panic!("{macro_name} is a macro"),
        }
    }

    #[test]
    fn date_macros_fall_where_pocketbase_puts_them() {
        assert_eq!(at("@now", "2024-12-31 10:11:12"), "2024-12-31 10:11:12.000Z");
        assert_eq!(at("@todayStart", "2024-12-31 10:11:12"), "2024-12-31 00:00:00.000Z");
        assert_eq!(at("@todayEnd", "2024-12-31 10:11:12"), "2024-12-31 23:59:59.999Z");
        assert_eq!(at("@monthStart", "2024-12-31 10:11:12"), "2024-12-01 00:00:00.000Z");
        assert_eq!(at("@monthEnd", "2024-12-31 10:11:12"), "2024-12-31 23:59:59.999Z");
        assert_eq!(at("@monthEnd", "2024-02-10 10:11:12"), "2024-02-29 23:59:59.999Z");
        assert_eq!(at("@yearStart", "2024-06-15 10:11:12"), "2024-01-01 00:00:00.000Z");
        assert_eq!(at("@yearEnd", "2024-06-15 10:11:12"), "2024-12-31 23:59:59.999Z");
        assert_eq!(at("@yesterday", "2024-03-01 10:11:12"), "2024-02-29 10:11:12.000Z");
        assert_eq!(at("@weekday", "2024-06-16 10:11:12"), "0");
        assert_eq!(at("@month", "2024-06-16 10:11:12"), "6");
        assert!(macro_value("@never", Utc::now().naive_utc()).is_err());
    }
}
