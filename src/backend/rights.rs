//! Realtime's questions about a subscriber's rights ([`RowAccess`]), answered by the backend:
//! which rows a caller may read, and what they hold now, is asked as that caller's own read
//! would be — a GET of the rows by key, planned and run like any request, so row-level security
//! (or SQLite's access rules) decides exactly as it does for the REST API — and what a role may
//! read of a table comes from the database's grants (or the rules). Whether a caller could read
//! a deleted row is told on SQLite only, its rules evaluated on the old row (`sqlite/deleted.rs`).

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{Backend, Caller, Current, RequestInfo};
use crate::auth::Principal;
use crate::config::Config;
use crate::error::{code, Error};
use crate::outcome::Done;
use crate::plan::Plan;
use crate::realtime::{RowAccess, TableAccess};
use crate::schema::{QualifiedName, SharedSchema};

/// Keys asked for in one read at most.
const KEYS_PER_READ: usize = 100;

/// A row as JSON.
type Row = serde_json::Map<String, Value>;

/// The backend, as realtime asks it about rights.
pub struct Rights {
    backend: Arc<Backend>,
    schema: Arc<SharedSchema>,
    config: Arc<Config>,
}

impl Rights {
    /// Rights as `backend` decides them.
    pub fn new(backend: Arc<Backend>, schema: Arc<SharedSchema>, config: Arc<Config>) -> Rights {
        Rights { backend, schema, config }
    }

    /// The rows keyed by `keys` as `who` reads them now (its `columns`), `None` for each it may
    /// not read: a GET of `/<table>?select=<columns>&<key>=in.(...)` (or an `or` of `and`s for a
    /// composite key) as that caller, timestamps in UTC as the change feed writes them. The
    /// request is built as the parser would make it, and planned like any other.
    async fn read_keys(
        &self,
        who: &Principal,
        table: &QualifiedName,
        key: &[String],
        columns: &[String],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Option<Row>>, Error> {
        use rowgate_request::{ApiRequest, Field, Filter, LogicOp, LogicTree, Method, Operation, SelectItem};
        let schema = self
            .schema
            .load()
            .ok_or_else(|| Error::api(code::SCHEMA_CACHE_NOT_READY, "The schema cache is not loaded"))?;
        let asked: Vec<&Vec<Value>> = keys.iter().filter(|k| k.iter().all(|v| !v.is_null())).collect();
        if asked.is_empty() {
            return Ok(vec![None; keys.len()]);
        }
        let field = |name: &str| Field { name: name.to_owned(), json_path: Vec::new() };
        let select = key
            .iter()
            .chain(columns.iter().filter(|c| !key.contains(c)))
            .map(|c| SelectItem::Field {
                field: field(c),
                alias: None,
                cast: None,
                aggregate: None,
                aggregate_cast: None,
            })
            .collect();
        let filter = |name: &str, operation| Filter { field: field(name), negated: false, operation };
        let mut query = rowgate_request::QueryParams { select, ..Default::default() };
        if let [column] = key {
            let values = asked.iter().map(|k| text(&k[0])).collect();
            query.filters.push((Vec::new(), filter(column, Operation::In(values))));
        } else {
            let alternatives = asked
                .iter()
                .map(|k| LogicTree::Expr {
                    negated: false,
                    op: LogicOp::And,
                    children: key
                        .iter()
                        .zip(k.iter())
                        .map(|(c, v)| {
                            let eq = Operation::Compare {
                                op: rowgate_request::CompareOp::Eq,
                                quantifier: None,
                                value: text(v),
                            };
                            LogicTree::Filter(filter(c, eq))
                        })
                        .collect(),
                })
                .collect();
            query.logic.push((
                Vec::new(),
                LogicTree::Expr { negated: false, op: LogicOp::Or, children: alternatives },
            ));
        }
        let request = ApiRequest {
            method: Method::Get,
            target: rowgate_request::Target::Relation(table.name.clone()),
            profile: Some(table.schema.clone()),
            query,
            preferences: rowgate_request::Preferences { timezone: Some("UTC".into()), ..Default::default() },
            range_header: None,
            accept: Vec::new(),
            content_type: None,
        };
        let Plan::Read(plan) = Plan::build(&request, &Bytes::new(), &schema, &self.config)? else {
            return Err(Error::api(code::INTERNAL, "a read of keys planned as something else"));
        };
        // As a client's request would show them to row-level security (`request.headers`).
        let path = format!("/{}", table.name);
        let headers = [("accept-profile", table.schema.as_str()), ("prefer", "timezone=UTC")];
        let caller = Caller {
            principal: who,
            request: RequestInfo { method: "GET", path: &path, headers: &headers },
            schema: &schema,
            // After the change was visible on the primary: a replica may not have it yet.
            current: Current::Primary,
            written_at: None,
        };
        let outcome = self.backend.read(&plan, &caller).await?;
        // A pre-request function may refuse the read by the status it sets.
        let refused = outcome.set_by_sql.status.as_deref().is_some_and(|s| !s.trim_start().starts_with('2'));
        let mut rows: Vec<Row> = match outcome.done {
            Done::Read(read) if !refused => serde_json::from_slice(&read.body).unwrap_or_default(),
            _ => Vec::new(),
        };
        Ok(keys
            .iter()
            .map(|k| {
                let at = rows
                    .iter()
                    .position(|row| key.iter().zip(k).all(|(c, v)| row.get(c).is_some_and(|r| same(r, v))))?;
                Some(rows.swap_remove(at))
            })
            .collect())
    }
}

impl RowAccess for Rights {
    fn table_access<'a>(
        &'a self,
        who: &'a Principal,
        table: &'a QualifiedName,
    ) -> BoxFuture<'a, Result<TableAccess, Error>> {
        Box::pin(async move {
            match &*self.backend {
                Backend::Postgres(pg) => pg.table_access(&who.role, table).await,
                Backend::Sqlite(lite) => {
                    let columns = self
                        .schema
                        .load()
                        .and_then(|s| {
                            s.relations.get(table).map(|r| r.columns.iter().map(|c| c.name.clone()).collect())
                        })
                        .unwrap_or_default();
                    Ok(lite.table_access(who, &table.name, columns))
                }
            }
        })
    }

    fn rows<'a>(
        &'a self,
        who: &'a Principal,
        table: &'a QualifiedName,
        key: &'a [String],
        columns: &'a [String],
        keys: &'a [Vec<Value>],
    ) -> BoxFuture<'a, Result<Vec<Option<Row>>, Error>> {
        Box::pin(async move {
            if key.is_empty() {
                return Ok(vec![None; keys.len()]);
            }
            // No more keys in one read than `db-max-rows` lets it return.
            let per_read =
                self.config.db.max_rows.map_or(KEYS_PER_READ, |m| (m as usize).clamp(1, KEYS_PER_READ));
            let mut seen = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(per_read) {
                seen.extend(self.read_keys(who, table, key, columns, chunk).await?);
            }
            Ok(seen)
        })
    }

    fn saw_deleted<'a>(
        &'a self,
        who: &'a Principal,
        table: &'a QualifiedName,
        old: &'a Row,
    ) -> BoxFuture<'a, Result<Option<bool>, Error>> {
        Box::pin(async move {
            Ok(match &*self.backend {
                // Its policies are SQL the change's old row is no longer there to be read by.
                Backend::Postgres(_) => None,
                Backend::Sqlite(lite) => lite.could_read_deleted(who, &table.name, old),
            })
        })
    }
}

/// A key value as a filter's operand: its text (a string as it is, anything else as JSON
/// writes it).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a value read back equals the asked one (numbers by value: `1.50` is `1.5`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::String(y)) | (Value::String(y), Value::Number(x)) => x.to_string() == *y,
        (x, y) => x == y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_are_asked_for_as_their_text() {
        assert_eq!(text(&Value::from(5)), "5");
        assert_eq!(text(&Value::from("a,b")), "a,b");
        assert_eq!(text(&Value::from("say \"x\"")), "say \"x\"");
        assert!(same(&serde_json::json!(1.5), &serde_json::json!(1.50)));
    }
}
