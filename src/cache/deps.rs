//! What a read depends on, for the response cache: the tables (or rows of tables, by a key
//! value) whose changes can change its answer, derived from its plan and the schema cache's
//! dependencies.

use std::sync::Arc;

use crate::plan::{Condition, EmbedPlan, Expr, ReadPlan};
use crate::schema::{Reads, SchemaCache};

/// What a cached answer read: whole tables, rows of tables by a key value, or (a user
/// function being involved) any table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deps {
    /// Tables any change to which invalidates the answer.
    pub tables: Vec<u32>,
    /// (table, key column, [`row_key`] of the value in PostgreSQL's text form): only a change
    /// to a row with this value (before or after the change) invalidates the answer.
    pub rows: Vec<(u32, Arc<str>, String)>,
    /// A change to any table invalidates the answer.
    pub any_table: bool,
}

/// The change log's key of a row value.
pub fn row_key(table: u32, column: &str, value: &str) -> String {
    format!("{table}\u{0}{column}\u{0}{value}")
}

/// What a read plan depends on, or `None` if it cannot be cached: the union of its relations'
/// dependencies, any table if it calls a user function (the RPC itself, computed fields and
/// relationships); never a call of a function that may set `response.*`. A table the plan reads only by key values (`id=eq.5`, `id=in.(1,2)`, an
/// embed joined on such a column) depends on those rows alone.
pub fn plan_deps(plan: &ReadPlan, schema: &SchemaCache) -> Option<Deps> {
    // A function that may set response headers (cookies, say) answers for one caller.
    if plan.transaction.is_some()
        || plan.explain.is_some()
        || plan.call.as_ref().is_some_and(|c| c.sets_response)
    {
        return None;
    }
    let mut walk = Walk { schema, deps: Deps::default(), unbounded: false };
    let restriction = match &plan.call {
        Some(call) => {
            walk.function(&call.function);
            None
        }
        None => {
            let r = restriction(&plan.relation, &plan.conditions);
            walk.relation(&plan.relation, r.as_ref());
            r
        }
    };
    plan.columns.iter().for_each(|c| walk.expr(&c.expr, restriction.as_ref()));
    plan.conditions.iter().for_each(|c| walk.condition(c, restriction.as_ref()));
    plan.order.iter().for_each(|o| walk.expr(&o.expr, restriction.as_ref()));
    if walk.unbounded {
        return None;
    }
    let mut deps = walk.deps;
    if deps.any_table {
        deps.tables.clear();
        deps.rows.clear();
    }
    deps.tables.sort_unstable();
    deps.tables.dedup();
    deps.rows.sort();
    deps.rows.dedup();
    Some(deps)
}

/// Rows of a relation by the values of one column.
type Restriction = (String, Vec<String>);

/// A top-level `col=eq.v` or `col=in.(...)` on a column whose text form PostgreSQL prints
/// canonically, with the values in that form; anything else restricts nothing.
fn restriction(relation: &crate::schema::Relation, conditions: &[Condition]) -> Option<Restriction> {
    use rowgate_request::{CompareOp, Operation};
    let candidates = conditions.iter().filter_map(|c| {
        let Condition::Filter { expr: Expr::Column(col), filter, .. } = c else { return None };
        if filter.negated {
            return None;
        }
        let values: Vec<&str> = match &filter.operation {
            Operation::Compare { op: CompareOp::Eq, quantifier: None, value } => vec![value.as_str()],
            Operation::In(values) => values.iter().map(String::as_str).collect(),
            _ => return None,
        };
        let column = relation.column(col)?;
        let canonical: Option<Vec<String>> = values.iter().map(|v| canonical_text(column, v)).collect();
        canonical.map(|values| (col.clone(), values))
    });
    // Change notifications carry key columns only (primary, unique, foreign): a restriction on
    // another column holds only until the table's next change, so a key column is preferred.
    let is_key = |col: &str| {
        relation.primary_key.iter().any(|c| c == col)
            || relation.unique_keys.iter().flatten().any(|c| c == col)
            || relation.foreign_keys.iter().flat_map(|fk| &fk.columns).any(|c| c == col)
    };
    let mut first = None;
    for (col, values) in candidates {
        if is_key(&col) {
            return Some((col, values));
        }
        first.get_or_insert((col, values));
    }
    first
}

/// A filter value as PostgreSQL prints the column's value that equals it, for the types where
/// that is unambiguous; `None` otherwise (or when the value is not of the type at all).
fn canonical_text(column: &crate::schema::Column, value: &str) -> Option<String> {
    use crate::schema::ValueKind;
    match column.kind {
        ValueKind::Int2 | ValueKind::Int4 | ValueKind::Int8 => {
            value.trim().parse::<i64>().ok().map(|n| n.to_string())
        }
        ValueKind::Uuid => {
            let v = value.to_ascii_lowercase();
            let groups: Vec<&str> = v.split('-').collect();
            let shape = groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
                && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()));
            shape.then_some(v)
        }
        // Plain text under a deterministic collation: equal means the same bytes. (Padded
        // `character(n)`, `citext` and enums are left out.)
        ValueKind::Text
            if column.type_name == "text" || column.type_name.starts_with("character varying") =>
        {
            Some(value.to_owned())
        }
        _ => None,
    }
}

struct Walk<'s> {
    schema: &'s SchemaCache,
    deps: Deps,
    unbounded: bool,
}

impl Walk<'_> {
    fn relation(&mut self, relation: &crate::schema::Relation, restriction: Option<&Restriction>) {
        match self.schema.dependencies.relations.get(&relation.oid) {
            Some(Reads::Tables(tables)) => {
                for t in tables {
                    match restriction {
                        Some((col, values))
                            if *t == relation.oid
                                && !self.schema.dependencies.self_reading.contains(&relation.oid) =>
                        {
                            let col: Arc<str> = col.as_str().into();
                            for v in values {
                                self.deps.rows.push((*t, col.clone(), row_key(*t, &col, v)));
                            }
                        }
                        _ => self.deps.tables.push(*t),
                    }
                }
            }
            Some(Reads::AnyTable) => self.deps.any_table = true,
            Some(Reads::Unbounded) | None => self.unbounded = true,
        }
    }

    fn function(&mut self, name: &crate::schema::QualifiedName) {
        // Overloads share the name; any volatile one makes the call uncacheable.
        let volatile = self
            .schema
            .functions
            .get(name)
            .is_none_or(|fs| fs.iter().any(|f| f.volatility == crate::schema::Volatility::Volatile));
        match self.schema.dependencies.function(volatile) {
            Reads::Unbounded => self.unbounded = true,
            _ => self.deps.any_table = true,
        }
    }

    /// An embedded relation, restricted by its own filters or else through the join column
    /// its parent is restricted on.
    fn embed(&mut self, e: &EmbedPlan, parent: Option<&Restriction>) {
        let own = match (&e.computed, &e.through) {
            (Some(f), _) => {
                self.function(f);
                None
            }
            (None, Some(j)) => {
                self.relation(&j.relation, None);
                self.relation(&e.relation, None);
                None
            }
            (None, None) => {
                let inherited = parent.and_then(|(col, values)| {
                    let (_, child) = e.join.iter().find(|(p, _)| p == col)?;
                    let column = e.relation.column(child)?;
                    let values: Option<Vec<String>> =
                        values.iter().map(|v| canonical_text(column, v)).collect();
                    Some((child.clone(), values?))
                });
                let r = restriction(&e.relation, &e.conditions).or(inherited);
                self.relation(&e.relation, r.as_ref());
                r
            }
        };
        e.columns.iter().for_each(|c| self.expr(&c.expr, own.as_ref()));
        e.conditions.iter().for_each(|c| self.condition(c, own.as_ref()));
        e.order.iter().for_each(|o| self.expr(&o.expr, own.as_ref()));
    }

    fn expr(&mut self, e: &Expr, level: Option<&Restriction>) {
        match e {
            Expr::Column(_) | Expr::JsonPath { .. } => {}
            Expr::Cast(inner, _) => self.expr(inner, level),
            Expr::Represented { function, expr } => {
                self.function(function);
                self.expr(expr, level);
            }
            Expr::Embed(embed) => self.embed(embed, level),
            Expr::Computed { function, .. } => self.function(function),
            Expr::Aggregate(_, arg) => {
                if let Some(a) = arg {
                    self.expr(a, level);
                }
            }
            Expr::Related { embed, expr, .. } => {
                self.embed(embed, level);
                // The value is over the embedded relation's columns; its embeds are read
                // without a restriction.
                self.expr(expr, None);
            }
        }
    }

    fn condition(&mut self, c: &Condition, level: Option<&Restriction>) {
        match c {
            Condition::Filter { expr, .. } => self.expr(expr, level),
            Condition::Exists { embed, .. } => self.embed(embed, level),
            Condition::Logic { children, .. } => children.iter().for_each(|c| self.condition(c, level)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_values_become_postgres_text() {
        let col = |kind, type_name: &str| crate::schema::Column {
            name: "c".into(),
            type_name: type_name.into(),
            type_oid: 0,
            kind,
            nullable: true,
            default: None,
            comment: None,
            data_type: type_name.into(),
            max_length: None,
            enum_values: Vec::new(),
        };
        use crate::schema::ValueKind::*;
        assert_eq!(canonical_text(&col(Int4, "integer"), "007"), Some("7".into()));
        assert_eq!(canonical_text(&col(Int4, "integer"), "x"), None);
        assert_eq!(
            canonical_text(&col(Uuid, "uuid"), "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
            Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into())
        );
        assert_eq!(canonical_text(&col(Uuid, "uuid"), "{a0eebc999c0b4ef8bb6d6bb9bd380a11}"), None);
        assert_eq!(canonical_text(&col(Text, "text"), "Ab "), Some("Ab ".into()));
        assert_eq!(canonical_text(&col(Text, "character(3)"), "Ab"), None);
        assert_eq!(canonical_text(&col(Text, "citext"), "Ab"), None);
    }
}
