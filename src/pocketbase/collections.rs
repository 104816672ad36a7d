//! `/api/collections`: PocketBase's collections API, for superusers. A collection made here is
//! a real table of the exposed schema with its definition stored beside it
//! (`crate::backend::collections`), so the REST API and Supabase's clients see the same rows
//! under the same rules; a table made in SQL is a collection too, shown as PocketBase would
//! describe it, but is changed in SQL.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::collection::{format_date, Collection, FieldKind};
use super::definition::{self, Definition};
use super::error::{respond, PbError};
use super::fields::Picked;
use super::filter::{self, Filter, Operand, SignOp};
use super::records::{object, Query};
use super::rules;
use super::Context;
use crate::backend::collections::{CollectionChange, CollectionsDb, TableAccess, TableChange};
use crate::response::Body;

/// The collections' store, and their definitions as last read with the schema cache snapshot
/// they were read at: read again when the schema changes (every change of a collection does).
pub struct Collections {
    db: CollectionsDb,
    held: std::sync::Mutex<Option<Held>>,
}

type Held = (Arc<crate::schema::SchemaCache>, Arc<Vec<Definition>>);

impl Collections {
    /// Over `db`.
    pub fn new(db: CollectionsDb) -> Collections {
        Collections { db, held: Default::default() }
    }

    /// The definitions as of `schema`.
    pub async fn of(
        &self,
        schema: &Arc<crate::schema::SchemaCache>,
    ) -> Result<Arc<Vec<Definition>>, PbError> {
        if let Some((at, defs)) = &*self.held.lock().unwrap_or_else(|e| e.into_inner()) {
            if Arc::ptr_eq(at, schema) {
                return Ok(defs.clone());
            }
        }
        let texts = self.db.definitions().await.map_err(|e| {
            // The server's own trouble (on PostgreSQL, a role that may not read them), not
            // the caller's: not the 403 a refused read of the caller's would be.
            let message = "Something went wrong while processing your request.";
            PbError::with_status(
                StatusCode::INTERNAL_SERVER_ERROR,
                message,
                format!("reading the collections: {e}"),
            )
        })?;
        let defs = Arc::new(texts.iter().filter_map(|t| Definition::parse(t)).collect::<Vec<_>>());
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some((schema.clone(), defs.clone()));
        Ok(defs)
    }

    /// Makes `change`; the next request reads the definitions again.
    async fn apply(&self, change: CollectionChange, refused: &'static str) -> Result<(), PbError> {
        let dropped = matches!(change.change, TableChange::Drop);
        let applied = self.db.apply(change).await;
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = None;
        applied.map_err(|e| match e.code() {
            // A collection's references are found before; one the database finds is SQL's.
            "23503" | "2BP01" if dropped => still_referred("a table made in SQL"),
            _ => ddl_failed(e, refused),
        })
    }
}

/// A collection's definition in `defs`, by name (any case) or id.
pub fn defined<'d>(defs: &'d [Definition], name_or_id: &str) -> Option<&'d Definition> {
    defs.iter().find(|d| d.id() == name_or_id || d.name().eq_ignore_ascii_case(name_or_id))
}

/// Answers a request below `/api/collections` that is not a record's.
pub async fn route(
    cx: &Context<'_>,
    store: &Collections,
    schema: &Arc<crate::schema::SchemaCache>,
    method: &Method,
    rest: &[&str],
    body: &Bytes,
    query: &Query,
) -> Result<Response<Body>, PbError> {
    let known = matches!(
        (method, rest),
        (&Method::GET | &Method::POST, [])
            | (&Method::GET | &Method::PATCH | &Method::DELETE, [_])
            | (&Method::DELETE, [_, "truncate"])
    );
    if !known {
        return Err(PbError::no_route());
    }
    if !cx.superuser() {
        return Err(match cx.principal.anonymous {
            true => PbError::unauthorized(),
            false => PbError::forbidden("The authorized record is not allowed to perform this action."),
        });
    }
    let all = store.of(schema).await?;
    let now = format_date(chrono::Utc::now().naive_utc());
    let shown =
        |d: &Definition| Picked::parse(query.get("fields")).map(|p| Value::Object(p.apply(d.0.clone())));
    let done = match (method, rest) {
        (&Method::GET, []) => return list(cx, &all, query),
        (&Method::GET, [name]) => {
            let d = find(cx, &all, &super::decoded(name)).ok_or_else(PbError::not_found)?;
            return Ok(respond(StatusCode::OK, &shown(&d)?));
        }
        (&Method::POST, []) => {
            let body = Value::Object(object(body, "Failed to create collection.")?);
            let d = definition::checked(
                &body,
                None,
                &|name| taken(cx, &all, name),
                &|id| find(cx, &all, id).is_some(),
                &now,
            )?;
            let table = |id: &str| find(cx, &all, id).map(|d| d.name().to_owned());
            let c = Collection::from_definition(cx.exposed, &d, &table);
            let access = rules::access(&d, &c, cx.schema, "Failed to create collection.")?;
            let change = CollectionChange {
                id: d.id().to_owned(),
                table: d.name().to_owned(),
                change: TableChange::Create { columns: d.columns(&table) },
                access,
                definition: Some(Value::Object(d.0.clone()).to_string()),
            };
            store.apply(change, "Failed to create collection.").await?;
            d
        }
        (&Method::PATCH, [name]) => {
            let before = own(&all, &super::decoded(name), cx)?;
            let body = Value::Object(object(body, "Failed to update collection.")?);
            let d = definition::checked(
                &body,
                Some(&before),
                &|name| taken(cx, &all, name),
                &|id| find(cx, &all, id).is_some(),
                &now,
            )?;
            let table = |id: &str| match id == before.id() {
                true => Some(d.name().to_owned()),
                false => find(cx, &all, id).map(|d| d.name().to_owned()),
            };
            let c = Collection::from_definition(cx.exposed, &d, &table);
            let access = rules::access(&d, &c, cx.schema, "Failed to update collection.")?;
            let change = altered(&before, &d, &table, access)?;
            store.apply(change, "Failed to update collection.").await?;
            d
        }
        (&Method::DELETE, [name]) => {
            let d = own(&all, &super::decoded(name), cx)?;
            if let Some(by) = all.iter().find(|o| o.id() != d.id() && refers_to(o, d.id())) {
                return Err(still_referred(by.name()));
            }
            store.apply(emptied(&d, TableChange::Drop), "Failed to delete collection.").await?;
            return Ok(no_content());
        }
        (&Method::DELETE, [name, "truncate"]) => {
            let d = find(cx, &all, &super::decoded(name)).ok_or_else(PbError::not_found)?;
            store.apply(emptied(&d, TableChange::Truncate), "Failed to truncate collection.").await?;
            return Ok(no_content());
        }
        _ => return Err(PbError::no_route()),
    };
    Ok(respond(StatusCode::OK, &shown(&done)?))
}

/// A drop or truncate of `d`'s table: no definition or access is written.
fn emptied(d: &Definition, change: TableChange) -> CollectionChange {
    CollectionChange {
        id: d.id().to_owned(),
        table: d.name().to_owned(),
        change,
        access: TableAccess::NOBODY,
        definition: None,
    }
}

/// `GET /api/collections`: a page of them, with `page`, `perPage`, `sort`, `filter` (of their
/// top-level keys), `fields` and `skipTotal`.
fn list(cx: &Context<'_>, all: &[Definition], query: &Query) -> Result<Response<Body>, PbError> {
    let mut items: Vec<Map<String, Value>> = every(cx, all).into_iter().map(|d| d.0).collect();
    if let Some(text) = query.get("filter") {
        if let Some(parsed) = filter::parse(text).map_err(|e| PbError::bad_request(e.0))? {
            let mut kept = Vec::with_capacity(items.len());
            for item in items {
                if holds(&parsed, &item)? {
                    kept.push(item);
                }
            }
            items = kept;
        }
    }
    if let Some(sort) = query.get("sort").filter(|s| !s.trim().is_empty()) {
        let keys: Vec<(bool, String)> = sort
            .split(',')
            .map(|k| k.trim())
            .map(|k| match k.strip_prefix('-') {
                Some(k) => (true, k.to_owned()),
                None => (false, k.trim_start_matches('+').to_owned()),
            })
            .collect();
        items.sort_by(|a, b| {
            keys.iter()
                .map(|(desc, k)| {
                    let o = text_of(a.get(k)).cmp(&text_of(b.get(k)));
                    if *desc {
                        o.reverse()
                    } else {
                        o
                    }
                })
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    let page = query.get("page").and_then(|p| p.parse::<usize>().ok()).filter(|p| *p >= 1).unwrap_or(1);
    let per_page = query
        .get("perPage")
        .and_then(|p| p.parse::<usize>().ok())
        .filter(|p| *p >= 1)
        .unwrap_or(30)
        .min(1000);
    let skip_total = query.get("skipTotal").is_some_and(|v| matches!(v, "1" | "true" | "t"));
    let total = items.len();
    let picked = Picked::parse(query.get("fields"))?;
    let shown: Vec<Value> = items
        .into_iter()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .map(|d| Value::Object(picked.apply(d)))
        .collect();
    let (total_items, total_pages) = match skip_total {
        true => (-1, -1),
        false => (total as i64, total.div_ceil(per_page) as i64),
    };
    Ok(respond(
        StatusCode::OK,
        &json!({"items": shown, "page": page, "perPage": per_page, "totalItems": total_items, "totalPages": total_pages}),
    ))
}

/// Every collection: those made here, then the tables made in SQL as PocketBase would show them.
fn every(cx: &Context<'_>, all: &[Definition]) -> Vec<Definition> {
    let mut out: Vec<Definition> = all.to_vec();
    let mut names: Vec<&str> =
        cx.schema.relations.keys().filter(|n| n.schema == cx.exposed).map(|n| n.name.as_str()).collect();
    names.sort_unstable();
    for name in names {
        if defined(all, name).is_none() {
            if let Some(d) = described(cx, name) {
                out.push(d);
            }
        }
    }
    out
}

/// The collection named (or with the id) `name_or_id`: made here, or a table made in SQL.
fn find(cx: &Context<'_>, all: &[Definition], name_or_id: &str) -> Option<Definition> {
    if let Some(d) = defined(all, name_or_id) {
        return Some(d.clone());
    }
    let c = Collection::named(cx.schema, cx.exposed, name_or_id)?;
    described(cx, c.name())
}

/// A table made in SQL as PocketBase would describe it (no rules: its access is the backend's).
fn described(cx: &Context<'_>, name: &str) -> Option<Definition> {
    let c = Collection::find(cx.schema, cx.exposed, name)?;
    let fields: Vec<(String, &'static str, Map<String, Value>)> = c
        .fields
        .iter()
        .map(|f| {
            let mut options = Map::from_iter([("required".into(), Value::Bool(f.required))]);
            let kind = match (f.kind, &f.relation) {
                (_, Some(link)) => {
                    let target = definition::collection_id("base", &link.collection);
                    options.extend([
                        ("collectionId".into(), Value::String(target)),
                        ("maxSelect".into(), json!(1)),
                    ]);
                    "relation"
                }
                (FieldKind::Number, _) => "number",
                (FieldKind::Bool, _) => "bool",
                (FieldKind::Json, _) => "json",
                (FieldKind::Date, _) => "date",
                (FieldKind::Text, _) => "text",
            };
            (f.name.clone(), kind, options)
        })
        .collect();
    Some(definition::described(name, &fields, ""))
}

/// A collection made through this API (a table made in SQL is changed in SQL).
fn own(all: &[Definition], name: &str, cx: &Context<'_>) -> Result<Definition, PbError> {
    match defined(all, name) {
        Some(d) => Ok(d.clone()),
        None if find(cx, all, name).is_some() => Err(PbError::invalid(
            "This collection's table was made in SQL: change it in SQL (rowgate changes only the collections it made).",
            Map::new(),
        )),
        None => Err(PbError::not_found()),
    }
}

/// Whether a collection or a table has the name `name` (any case).
fn taken(cx: &Context<'_>, all: &[Definition], name: &str) -> bool {
    defined(all, name).is_some()
        || cx.schema.relations.keys().any(|n| n.schema == cx.exposed && n.name.eq_ignore_ascii_case(name))
}

/// Whether a field of `d` is a relation to the collection `id`.
fn refers_to(d: &Definition, id: &str) -> bool {
    d.fields().any(|f| {
        f.get("type").and_then(Value::as_str) == Some("relation")
            && f.get("collectionId").and_then(Value::as_str) == Some(id)
    })
}

/// The change from `before` to `after`: fields matched by id, a renamed one's column renamed,
/// a removed one's dropped, a new one's added.
fn altered(
    before: &Definition,
    after: &Definition,
    table: &dyn Fn(&str) -> Option<String>,
    access: TableAccess,
) -> Result<CollectionChange, PbError> {
    let id_of = |f: &Map<String, Value>| f.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
    let name_of =
        |f: &Map<String, Value>| f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let old_columns = before.columns(table);
    let new_columns = after.columns(table);
    let (mut renamed, mut dropped, mut added) = (Vec::new(), Vec::new(), Vec::new());
    let mut errors = Map::new();
    for (i, field) in after.fields().enumerate() {
        let name = name_of(field);
        let column = new_columns.iter().find(|c| c.name == name);
        match before.fields().find(|b| id_of(b) == id_of(field)) {
            None => added.extend(column.cloned()),
            Some(old) => {
                let old_column = old_columns.iter().find(|c| c.name == name_of(old));
                let same = match (old_column, column) {
                    (Some(a), Some(b)) => a.kind == b.kind && a.references == b.references,
                    (a, b) => a.is_none() && b.is_none(),
                };
                if old.get("type") != field.get("type") {
                    errors.insert(
                        i.to_string(),
                        PbError::field("validation_field_type_change", "Field type cannot be changed."),
                    );
                } else if !same {
                    errors.insert(
                        i.to_string(),
                        PbError::field(
                            "validation_field_storage_change",
                            "rowgate cannot change how this field is stored yet: remove it and add a new one.",
                        ),
                    );
                } else if name_of(old) != name {
                    renamed.push((name_of(old), name));
                }
            }
        }
    }
    for old in before.fields() {
        if !after.fields().any(|f| id_of(f) == id_of(old)) {
            dropped.push(name_of(old));
        }
    }
    if !errors.is_empty() {
        return Err(PbError::invalid(
            "Failed to update collection.",
            Map::from_iter([("fields".into(), Value::Object(errors))]),
        ));
    }
    Ok(CollectionChange {
        id: after.id().to_owned(),
        table: after.name().to_owned(),
        change: TableChange::Alter { from: before.name().to_owned(), renamed, dropped, added },
        access,
        definition: Some(Value::Object(after.0.clone()).to_string()),
    })
}

/// Whether `filter` holds for a collection's top-level keys (`name`, `type`, `system`, ...).
fn holds(filter: &Filter, item: &Map<String, Value>) -> Result<bool, PbError> {
    match filter {
        Filter::All(terms) => {
            for t in terms {
                if !holds(t, item)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Filter::Any(terms) => {
            for t in terms {
                if holds(t, item)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Filter::Compare { left, sign, right } => {
            let (a, b) = (operand(left, item)?, operand(right, item)?);
            Ok(match sign.op {
                SignOp::Eq => a == b,
                SignOp::Neq => a != b,
                SignOp::Like => a.to_lowercase().contains(&b.to_lowercase()),
                SignOp::NotLike => !a.to_lowercase().contains(&b.to_lowercase()),
                _ => return Err(PbError::bad_request("only = != ~ !~ filter collections")),
            })
        }
    }
}

fn operand(operand: &Operand, item: &Map<String, Value>) -> Result<String, PbError> {
    Ok(match operand {
        Operand::Text(t) | Operand::Number(t) => t.clone(),
        Operand::Identifier(name) if matches!(name.as_str(), "true" | "false") => name.clone(),
        Operand::Identifier(name) if name == "null" => String::new(),
        Operand::Identifier(name) => match item.get(name) {
            Some(v) => text_of(Some(v)),
            None => return Err(PbError::bad_request(format!("collections have no {name}"))),
        },
        Operand::Function { .. } => return Err(PbError::bad_request("a function in a collections filter")),
    })
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

fn still_referred(by: &str) -> PbError {
    let message = format!("Failed to delete collection probably due to existing reference in {by}.");
    PbError::with_status(StatusCode::BAD_REQUEST, message, String::new())
}

/// A change the database refused: a client's mistake PocketBase's words for it, else 500.
fn ddl_failed(e: crate::error::Error, refused: &'static str) -> PbError {
    match e.to_response().status.is_server_error() {
        true => PbError::from_backend(e, None),
        false => {
            tracing::warn!(error = %e, "the database refused a change of a collection");
            PbError::with_status(StatusCode::BAD_REQUEST, refused, e.to_string())
        }
    }
}

fn no_content() -> Response<Body> {
    let mut r = Response::new(Body::default());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}
