//! `ApiRequest` + `SchemaCache` + `Config` → [`Plan`]: names resolved against the schema cache,
//! the media type negotiated, the row range computed. No I/O: everything the SQL stage needs
//! is decided here, and everything that cannot run is rejected here with PostgREST's error.

mod embed;
mod media;
mod mutate;
mod nested;
mod payload;
mod preferences;
mod range;
mod rpc;
mod select;
mod types;

use rowgate_request::{ApiRequest, EmbedPath, MediaType, Method, SelectItem, Target};

pub use media::{Explain, Handler, Media, RootMedia};
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
                reject_embed_paths(request, config)?;
                return Ok(Plan::Read(rpc::plan(request, body, schema, config, schema_name, function)?));
            }
            Target::Root => return root(request, body, schema, config, schema_name),
        };
        let relation = schema
            .relation(schema_name, name)
            .ok_or_else(|| relation_not_found(schema, schema_name, name))?
            .clone();
        let head = match request.method {
            Method::Get => false,
            Method::Head => true,
            Method::Post | Method::Put | Method::Patch | Method::Delete => {
                reject_embed_paths(request, config)?;
                return Ok(Plan::Mutate(mutate::plan(request, schema, config, relation, schema_name, body)?));
            }
            Method::Options => return Ok(Plan::Options(allowed_methods(&relation))),
        };
        let (media, explain, handler) = negotiate(request, schema, config, &relation.name)?;
        let (timezone, applied) = preferences(&request.preferences, schema)?;
        reject_embed_paths(request, config)?;
        let planner = Planner::top(&relation, schema, schema_name, &request.query, config);
        // `select=` with nothing PostgREST can read selects everything, as PostgREST does.
        let columns = if request.query.select.is_empty() {
            planner.columns(&[SelectItem::Star])?
        } else {
            planner.columns(&request.query.select)?
        };
        let (mut conditions, order) = planner.level(&columns)?;
        conditions.extend(inner_joins(&columns));
        let window = range::window(request, config.db.max_rows)?;
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
            handler,
        }))
    }
}

/// `/`: the OpenAPI description, or `db-root-spec`'s function called as `GET /rpc/<fn>` would be
/// (its JSON answers `application/openapi+json` too); 404 PGRST126 with `openapi-mode =
/// disabled`, as PostgREST's.
fn root(
    request: &ApiRequest,
    body: &[u8],
    schema: &SchemaCache,
    config: &Config,
    schema_name: &str,
) -> Result<Plan, Error> {
    if config.openapi.mode == crate::config::OpenApiMode::Disabled {
        return Err(Error::api(code::OPENAPI_DISABLED, "Root endpoint metadata is disabled"));
    }
    if request.method == Method::Options {
        return Ok(Plan::Options("OPTIONS,GET,HEAD"));
    }
    if let Some(function) = &config.db.root_spec {
        let mut call = request.clone();
        for media in &mut call.accept {
            if matches!(media, MediaType::OpenApi | MediaType::OpenApi31) {
                *media = MediaType::Json;
            }
        }
        // PostgREST calls `schema.fn`'s `fn` in the schema asked for.
        let function = function.rsplit_once('.').map_or(function.as_str(), |(_, name)| name);
        return Ok(Plan::Read(rpc::plan(&call, body, schema, config, schema_name, function)?));
    }
    let head = match request.method {
        Method::Get => false,
        Method::Head => true,
        other => {
            return Err(Error::api(
                code::UNSUPPORTED_METHOD,
                format!("Unsupported HTTP method: {}", other.as_str()),
            ))
        }
    };
    let v31 = config.openapi.version == crate::config::OpenApiVersion::V31;
    let media = media::negotiate_root(&request.accept, v31)?;
    Ok(Plan::Describe(DescribePlan { schema: schema_name.to_owned(), media, head }))
}

/// The response's media type, plan output and media type handler for a request on
/// `identifier` (the relation, or the function called); a relation's own handlers apply only
/// with PostgREST's default `select=*`.
fn negotiate(
    request: &ApiRequest,
    schema: &SchemaCache,
    config: &Config,
    identifier: &crate::schema::QualifiedName,
) -> Result<(Media, Option<Explain>, Option<Handler>), Error> {
    let target = media::HandlerTarget {
        handlers: &schema.media_handlers,
        identifier,
        default_select: matches!(request.query.select.as_slice(), [] | [SelectItem::Star]),
    };
    media::negotiate_with_handlers(&request.accept, config.db.plan_enabled, schema.postgis.is_some(), &target)
}

/// The schema from `Accept-Profile`/`Content-Profile`, or the default; 406 PGRST106 for one
/// that is not exposed.
fn select_schema<'c>(request: &ApiRequest, config: &'c Config) -> Result<&'c str, Error> {
    match &request.profile {
        None => Ok(&config.db.schemas[0]),
        Some(p) => config.db.schemas.iter().find(|s| *s == p).map(String::as_str).ok_or_else(|| Error::Api {
            code: code::UNACCEPTABLE_SCHEMA,
            message: format!("Invalid schema: {p}"),
            details: None,
            hint: Some(format!("Only the following schemas are exposed: {}", config.db.schemas.join(", "))),
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
/// (by alias, or by name when it has none); anything else is PostgREST's PGRST108. Naming an
/// aliased embed by its relation's name is PostgREST 16's legacy target name: allowed under
/// `url-use-legacy-target-names` (with a `Warning`), else PGRST108 saying so.
fn reject_embed_paths(request: &ApiRequest, config: &Config) -> Result<(), Error> {
    let legacy = named_targets(request)?;
    match legacy.first() {
        Some((name, alias)) if !config.url_use_legacy_target_names => Err(Error::Api {
            code: code::NOT_EMBEDDED,
            message: format!("'{name}' is not an embedded resource in this request"),
            details: Some("Target names are not allowed in filters if they have an alias".to_owned().into()),
            hint: Some(format!("Change '{name}' to '{alias}' in filters, orders or limits.")),
        }),
        _ => Ok(()),
    }
}

/// The aliased embeds (relation name, alias) the query string names by relation name, for
/// PostgREST 16's deprecation `Warning`.
pub fn legacy_target_names(request: &ApiRequest) -> Vec<(String, String)> {
    named_targets(request).unwrap_or_default()
}

/// The (relation name, alias) pairs of the aliased embeds the query string's filters, orders
/// and limits name by relation name; PGRST108 for a path that names no embed at all.
fn named_targets(request: &ApiRequest) -> Result<Vec<(String, String)>, Error> {
    let q = &request.query;
    let mut used = q
        .filters
        .iter()
        .map(|(p, _)| p)
        .chain(q.logic.iter().map(|(p, _)| p))
        .chain(q.order.iter().map(|(p, _)| p))
        .chain(q.ranges.iter().map(|(p, _)| p))
        .filter(|p| !p.is_empty())
        .peekable();
    if used.peek().is_none() {
        return Ok(Vec::new());
    }
    let mut valid = Vec::new();
    embed_paths(&q.select, &[], &[], &mut valid);
    let mut legacy: Vec<(String, String)> = Vec::new();
    for path in used {
        let mut ways = valid.iter().filter(|(p, _)| p == path);
        let Some(first) = ways.next() else {
            let known =
                (0..path.len()).rev().find(|n| valid.iter().any(|(v, _)| v[..] == path[..*n])).unwrap_or(0);
            return Err(not_embedded(path, &path[known]));
        };
        // Named by alias somewhere: not a legacy name.
        if first.1.is_empty() || ways.any(|(_, l)| l.is_empty()) {
            continue;
        }
        for pair in &first.1 {
            if !legacy.contains(pair) {
                legacy.push(pair.clone());
            }
        }
    }
    Ok(legacy)
}

/// A path that names an embed, and the (relation name, alias) pairs it names by relation name.
type TargetPath = (Vec<String>, Vec<(String, String)>);

/// Every path that names an embed of `select`: by its alias (or its name when it has none),
/// and by its name when it has an alias, with the (name, alias) pairs a path names that way.
fn embed_paths(
    select: &[SelectItem],
    prefix: &[String],
    legacy: &[(String, String)],
    out: &mut Vec<TargetPath>,
) {
    for item in select {
        if let SelectItem::Embed(e) = item {
            let mut keys = vec![(e.alias.clone().unwrap_or_else(|| e.name.clone()), None)];
            if let Some(alias) = e.alias.as_ref().filter(|a| **a != e.name) {
                keys.push((e.name.clone(), Some((e.name.clone(), alias.clone()))));
            }
            for (key, named) in keys {
                let mut path = prefix.to_vec();
                path.push(key);
                let mut pairs = legacy.to_vec();
                pairs.extend(named);
                embed_paths(&e.select, &path, &pairs, out);
                out.push((path, pairs));
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
