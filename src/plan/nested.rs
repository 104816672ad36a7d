//! rowgate's nested inserts, planned: the body keys that name a child relation (one whose
//! foreign key references the table), taken out of the payload with the children's columns,
//! and the read that shows the rows a nested insert made.

use rowgate_request::{CompareOp, Operation};

use super::mutate::{body_columns, MutatePlan, Nested, Returning};
use super::payload::{self, Payload};
use super::{Condition, Expr};
use crate::error::Error;
use crate::schema::{Relation, SchemaCache, ValueKind};

/// Finds the body keys that are no column of `relation` but name a relation whose foreign key
/// references it (a to-many relationship): they hold children to insert with each row. They
/// are taken out of the payload's keys; each child's other keys become the child's columns.
pub(super) fn nested_children(
    relation: &Relation,
    schema: &SchemaCache,
    payload: &mut Payload,
) -> Result<Vec<Nested>, Error> {
    let mut found = Vec::new();
    for key in payload.all_keys.clone() {
        if relation.column(&key).is_some() {
            continue;
        }
        let Some(child) = schema.relation(&relation.name.schema, &key) else { continue };
        let fks: Vec<&crate::schema::ForeignKey> =
            child.foreign_keys.iter().filter(|fk| fk.target == relation.name).collect();
        let [fk] = fks.as_slice() else { continue };
        let mut keys: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let objects: Vec<std::collections::HashMap<String, &serde_json::value::RawValue>> =
            serde_json::from_str(&payload.json).map_err(|_| invalid_nested(&key))?;
        for object in &objects {
            let Some(raw) = object.get(&key) else { continue };
            let children: Option<Vec<std::collections::HashMap<String, serde::de::IgnoredAny>>> =
                serde_json::from_str(raw.get()).map_err(|_| invalid_nested(&key))?;
            for c in children.iter().flatten() {
                for k in c.keys() {
                    if !fk.columns.contains(k) && seen.insert(k.clone()) {
                        if keys.len() == payload::MAX_KEYS {
                            return Err(invalid_nested(&key));
                        }
                        keys.push(k.clone());
                    }
                }
            }
        }
        let child_payload =
            Payload { json: String::new(), all_keys: keys.clone(), keys, rows: 0, textual: false };
        let mut columns = body_columns(child, &child_payload, None, schema)?;
        columns.iter_mut().for_each(|c| c.in_payload = true);
        let link = fk
            .columns
            .iter()
            .zip(&fk.target_columns)
            .map(|(c, t)| {
                let type_name = child.column(c).map(|col| col.type_name.clone()).unwrap_or_default();
                (c.clone(), type_name, t.clone())
            })
            .collect();
        found.push(Nested { key: key.clone(), child: child.clone(), link, columns });
    }
    payload.keys.retain(|k| !found.iter().any(|n| n.key == *k));
    payload.all_keys.retain(|k| !found.iter().any(|n| n.key == *k));
    Ok(found)
}

fn invalid_nested(key: &str) -> Error {
    Error::Request(rowgate_request::RequestError::InvalidBody(format!(
        "'{key}' must be an array of objects to insert as children"
    )))
}

impl MutatePlan {
    /// The read that shows what a nested insert made: the rows with these primary key values
    /// (text, in key order), shaped by `select=` (embeds show the children just inserted).
    pub fn representation_of(&self, keys: &[Vec<String>]) -> Option<super::ReadPlan> {
        let Returning::Representation(columns) = &self.returning else { return None };
        let pk = &self.relation.primary_key;
        let eq = |name: &String, value: &String| {
            let kind = self.relation.column(name).map_or(ValueKind::Other, |c| c.kind);
            Condition::Filter {
                expr: Expr::Column(name.clone()),
                kind,
                filter: rowgate_request::Filter {
                    field: rowgate_request::Field { name: name.clone(), json_path: Vec::new() },
                    negated: false,
                    operation: Operation::Compare {
                        op: CompareOp::Eq,
                        quantifier: None,
                        value: value.clone(),
                    },
                },
                parse: None,
            }
        };
        let condition = if keys.is_empty() {
            // Nothing inserted: a condition no row meets.
            Condition::Filter {
                expr: Expr::Column(pk[0].clone()),
                kind: ValueKind::Other,
                filter: rowgate_request::Filter {
                    field: rowgate_request::Field { name: pk[0].clone(), json_path: Vec::new() },
                    negated: false,
                    operation: Operation::In(Vec::new()),
                },
                parse: None,
            }
        } else {
            Condition::Logic {
                negated: false,
                op: rowgate_request::LogicOp::Or,
                children: keys
                    .iter()
                    .map(|values| Condition::Logic {
                        negated: false,
                        op: rowgate_request::LogicOp::And,
                        children: pk.iter().zip(values).map(|(n, v)| eq(n, v)).collect(),
                    })
                    .collect(),
            }
        };
        let mut conditions = vec![condition];
        conditions.extend(self.output_conditions.iter().cloned());
        Some(super::ReadPlan {
            relation: self.relation.clone(),
            schema: self.schema.clone(),
            columns: columns.clone(),
            conditions,
            order: self.order.clone(),
            window: super::RowWindow { offset: 0, limit: None },
            count: None,
            media: self.media,
            head: false,
            timezone: self.timezone.clone(),
            applied: self.applied.clone(),
            call: None,
            result: super::ResultShape::Rows,
            transaction: None,
            explain: None,
            postgis: self.postgis.clone(),
            handler: None,
        })
    }
}
