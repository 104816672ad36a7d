//! `ApiRequest` + `SchemaCache` + `Config` → [`Plan`]: names resolved against the schema cache,
//! the media type negotiated, the row range computed. No I/O: everything the SQL stage needs
//! is decided here, and everything that cannot run is rejected here with PostgREST's error.

mod embed;
mod media;
mod mutate;
mod payload;
mod preferences;
mod range;
mod rpc;
mod select;
mod types;

use rowgate_request::{ApiRequest, EmbedPath, Method, SelectItem, Target};

pub use media::{Explain, Media};
pub use mutate::{
    location_columns, put_mismatch, BodyColumn, MutatePlan, Mutation, Nested, OnConflict, Returning,
};
pub use payload::Payload;
pub use range::RowWindow;
pub use rpc::SCALAR_COLUMN;
pub use select::row_filter;
pub use types::*;

use preferences::{applied_tail, check_timezone, count_name, preferences, reject_invalid};
use select::{inner_joins, Planner};

use crate::config::Config;
use crate::error::{code, Error};
use crate::schema::{RelationKind, SchemaCache};

impl Plan {
    /// Plans `request` (with its `body`, for writes) against the schema cache.
    pub fn build(
        request: &ApiRequest,
        body: &[u8],
        schema: &SchemaCache,
        config: &Config,
    ) -> Result<Plan, Error> {
        let schema_name = select_schema(request, config)?;
        let name = match &request.target {
            Target::Relation(name) => name,
            Target::Rpc(function) => {
                if request.method == Method::Options {
                    return Ok(Plan::Options(rpc::allow(schema, schema_name, function)?));
                }
                reject_embed_paths(request)?;
                return Ok(Plan::Read(rpc::plan(request, body, schema, config, schema_name, function)?));
            }
            Target::Root if request.method == Method::Options => {
                return Ok(Plan::Options("OPTIONS,GET,HEAD"))
            }
            Target::Root => {
                return Err(Error::api(
                    code::UNSUPPORTED,
                    "The OpenAPI root is not served by this version of rowgate yet",
                ))
            }
        };
        let relation = schema
            .relation(schema_name, name)
            .ok_or_else(|| relation_not_found(schema, schema_name, name))?
            .clone();
        let head = match request.method {
            Method::Get => false,
            Method::Head => true,
            Method::Post | Method::Put | Method::Patch | Method::Delete => {
                reject_embed_paths(request)?;
                return Ok(Plan::Mutate(mutate::plan(request, schema, config, relation, schema_name, body)?));
            }
            Method::Options => return Ok(Plan::Options(allowed_methods(&relation))),
        };
        let (media, explain) =
            media::negotiate(&request.accept, config.db_plan_enabled, schema.postgis.is_some())?;
        let (timezone, applied) = preferences(&request.preferences, schema)?;
        reject_embed_paths(request)?;
        let planner = Planner::top(&relation, schema, schema_name, &request.query, config);
        // `select=` with nothing PostgREST can read selects everything, as PostgREST does.
        let columns = if request.query.select.is_empty() {
            planner.columns(&[SelectItem::Star])?
        } else {
            planner.columns(&request.query.select)?
        };
        let (mut conditions, order) = planner.level(&columns)?;
        conditions.extend(inner_joins(&columns));
        let window = range::window(request, config.db_max_rows)?;
        Ok(Plan::Read(ReadPlan {
            schema: schema_name.to_owned(),
            relation,
            columns,
            conditions,
            order,
            window,
            count: request.preferences.count,
            media,
            head,
            timezone,
            applied,
            call: None,
            result: ResultShape::Rows,
            transaction: None,
            explain,
            postgis: schema.postgis.clone(),
        }))
    }
}

/// The schema from `Accept-Profile`/`Content-Profile`, or the default; 406 PGRST106 for one
/// that is not exposed.
fn select_schema<'c>(request: &ApiRequest, config: &'c Config) -> Result<&'c str, Error> {
    match &request.profile {
        None => Ok(&config.db_schemas[0]),
        Some(p) => config.db_schemas.iter().find(|s| *s == p).map(String::as_str).ok_or_else(|| {
            Error::api(
                code::UNACCEPTABLE_SCHEMA,
                format!("The schema must be one of the following: {}", config.db_schemas.join(", ")),
            )
        }),
    }
}

/// The `Allow` header of a table or view: every method on a table (or a view PostgreSQL can
/// insert into, update and delete from), else GET and HEAD and what the view takes.
fn allowed_methods(relation: &crate::schema::Relation) -> &'static str {
    let w = relation.writable;
    let table = matches!(relation.kind, RelationKind::Table | RelationKind::PartitionedTable);
    match (table || (w.insert && w.update && w.delete), w.insert, w.update, w.delete) {
        (true, ..) => "OPTIONS,GET,HEAD,POST,PUT,PATCH,DELETE",
        (false, true, true, false) => "OPTIONS,GET,HEAD,POST,PUT,PATCH",
        (false, true, false, true) => "OPTIONS,GET,HEAD,POST,DELETE",
        (false, true, false, false) => "OPTIONS,GET,HEAD,POST",
        (false, false, true, true) => "OPTIONS,GET,HEAD,PATCH,DELETE",
        (false, false, true, false) => "OPTIONS,GET,HEAD,PATCH",
        (false, false, false, true) => "OPTIONS,GET,HEAD,DELETE",
        _ => "OPTIONS,GET,HEAD",
    }
}

fn relation_not_found(schema: &SchemaCache, schema_name: &str, name: &str) -> Error {
    Error::Api {
        code: code::RELATION_NOT_FOUND,
        message: format!("Could not find the table '{schema_name}.{name}' in the schema cache"),
        details: None,
        hint: schema
            .suggest_relation(schema_name, name)
            .map(|s| format!("Perhaps you meant the table '{schema_name}.{s}'")),
    }
}

/// Every filter, order and limit must name the top level or an embedded resource of `select`
/// (by alias or name); anything else is PostgREST's PGRST108.
fn reject_embed_paths(request: &ApiRequest) -> Result<(), Error> {
    let mut valid: Vec<Vec<String>> = vec![Vec::new()];
    embed_paths(&request.query.select, &[], &mut valid);
    let q = &request.query;
    let paths = q
        .filters
        .iter()
        .map(|(p, _)| p)
        .chain(q.logic.iter().map(|(p, _)| p))
        .chain(q.order.iter().map(|(p, _)| p))
        .chain(q.ranges.iter().map(|(p, _)| p));
    for path in paths {
        if !valid.contains(path) {
            let known =
                (0..path.len()).rev().find(|n| valid.iter().any(|v| v[..] == path[..*n])).unwrap_or(0);
            return Err(not_embedded(path, &path[known]));
        }
    }
    Ok(())
}

/// The paths of every embed in `select`, each by alias and by name.
fn embed_paths(select: &[SelectItem], prefix: &[String], out: &mut Vec<Vec<String>>) {
    for item in select {
        if let SelectItem::Embed(e) = item {
            for key in [e.alias.as_ref(), Some(&e.name)].into_iter().flatten() {
                let mut path = prefix.to_vec();
                path.push(key.clone());
                embed_paths(&e.select, &path, out);
                out.push(path);
            }
        }
    }
}

fn not_embedded(_path: &EmbedPath, name: &str) -> Error {
    Error::Api {
        code: code::NOT_EMBEDDED,
        message: format!("'{name}' is not an embedded resource in this request"),
        details: None,
        hint: Some(format!("Verify that '{name}' is included in the 'select' query parameter.")),
    }
}
