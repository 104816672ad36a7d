//! `ApiRequest` + `SchemaCache` + `Config` → [`Plan`]: names resolved against the schema cache,
//! the media type negotiated, the row range computed. No I/O: everything the SQL stage needs
//! is decided here, and everything that cannot run is rejected here with PostgREST's error.

mod media;
mod mutate;
mod payload;
mod range;
mod rpc;

use std::sync::Arc;

use rowgate_request::{
    ApiRequest, EmbedPath, Field, Filter, IsValue, LogicOp, LogicTree, Method, Operation, OrderTerm,
    PreferCount, PreferHandling, Preferences, SelectItem, Target,
};

pub use media::{Explain, Media};
pub use mutate::{
    location_columns, put_mismatch, BodyColumn, MutatePlan, Mutation, Nested, OnConflict, Returning,
};
pub use payload::Payload;
pub use range::RowWindow;
pub use rpc::SCALAR_COLUMN;

use crate::config::Config;
use crate::error::{code, sqlstate, Error};
use crate::schema::{Column, Relation, RelationKind, SchemaCache, ValueKind};

/// What the SQL stage renders for one request.
#[derive(Debug)]
pub enum Plan {
    /// A read of a table or view.
    Read(ReadPlan),
    /// A write to a table or view.
    Mutate(MutatePlan),
    /// `OPTIONS`: the methods the resource takes, for the `Allow` header.
    Options(&'static str),
}

/// A GET or HEAD on a table or view.
#[derive(Debug)]
pub struct ReadPlan {
    /// The relation read.
    pub relation: Arc<Relation>,
    /// The schema the request runs in (the first of `db-schemas` or the requested profile).
    pub schema: String,
    /// Output columns, in `select=` order.
    pub columns: Vec<OutputColumn>,
    /// Conditions, all of which must hold.
    pub conditions: Vec<Condition>,
    /// `ORDER BY` terms.
    pub order: Vec<OrderBy>,
    /// The rows asked for.
    pub window: RowWindow,
    /// `Prefer: count=`, if any.
    pub count: Option<PreferCount>,
    /// The response media type.
    pub media: Media,
    /// HEAD: compute headers only.
    pub head: bool,
    /// `Prefer: timezone=`, when valid: the session time zone of the request.
    pub timezone: Option<String>,
    /// The honoured preferences, for `Preference-Applied`.
    pub applied: Vec<String>,
    /// `/rpc/fn`: the function call whose rows are read instead of the relation's.
    pub call: Option<Call>,
    /// How the rows become the body.
    pub result: ResultShape,
    /// POST /rpc: the call runs in an explicit transaction (through the write path).
    pub transaction: Option<RpcTransaction>,
    /// `Accept: application/vnd.pgrst.plan`: answer with the statement's plan instead.
    pub explain: Option<Explain>,
    /// PostGIS's schema, for `application/geo+json`.
    pub postgis: Option<String>,
}

/// A function call in `FROM`.
#[derive(Debug, Clone)]
pub struct Call {
    /// The function.
    pub function: crate::schema::QualifiedName,
    /// Its arguments.
    pub args: CallArgs,
    /// The result is one value per row (read as the column `pgrst_scalar`).
    pub scalar: bool,
    /// The function is VOLATILE.
    pub volatile: bool,
}

/// A call's arguments, as the SQL stage binds them.
#[derive(Debug, Clone)]
pub enum CallArgs {
    /// Named arguments with their text values (query string), each cast to its type.
    Text(Vec<(crate::schema::FunctionArg, ArgValue)>),
    /// Named arguments unpacked from one JSON object by `json_to_record`.
    Json {
        /// A JSON array holding the object.
        payload: String,
        /// The arguments it gives.
        args: Vec<crate::schema::FunctionArg>,
    },
    /// The whole body as the one unnamed json/jsonb argument.
    Body {
        /// The body.
        payload: String,
        /// `json` or `jsonb`.
        type_name: String,
    },
}

/// An argument's value from the query string.
#[derive(Debug, Clone)]
pub enum ArgValue {
    /// One value.
    One(String),
    /// A variadic argument's values (`?v=1&v=2`), one array element each.
    Many(Vec<String>),
}

/// How a read's rows become its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultShape {
    /// An array of objects (or one object with a singular `Accept`).
    Rows,
    /// One object: a function returning one row of a composite type.
    Object,
    /// One JSON value: a function returning a scalar.
    Scalar,
    /// An array of JSON values: a function returning a set of scalars.
    ScalarSet,
    /// No body (204): a function returning void.
    Void,
}

/// How a POST /rpc call's transaction runs and ends.
#[derive(Debug, Clone, Copy)]
pub struct RpcTransaction {
    /// Read-only, for a function that is not VOLATILE.
    pub read_only: bool,
    /// Rolled back at the end (`db-tx-end`, `Prefer: tx=rollback`).
    pub rollback: bool,
    /// `Prefer: handling=strict, max-affected=N` (PGRST128).
    pub max_affected: Option<u64>,
}

/// A value expression over the relation's columns. Column names in it come from the schema
/// cache; JSON keys and filter values are bound as parameters by the SQL stage.
#[derive(Debug, Clone)]
pub enum Expr {
    /// A column.
    Column(String),
    /// `col->a->>b`.
    JsonPath {
        /// The column.
        column: String,
        /// The steps.
        steps: Vec<rowgate_request::JsonStep>,
        /// Composite and array columns are read through `to_jsonb`, as PostgREST does.
        to_jsonb: bool,
    },
    /// `expr::type`, `type` checked against the schema cache's type names.
    Cast(Box<Expr>, String),
    /// An embedded resource: a correlated subquery that yields JSON.
    Embed(Box<EmbedPlan>),
    /// A computed field: `fn(row)` of the level's row (`pgrst_<depth>`).
    Computed {
        /// The function.
        function: crate::schema::QualifiedName,
        /// The level whose row it takes.
        depth: usize,
    },
    /// `count(*)` (no argument) or `fn(arg)`: an aggregate over the level's rows, which are then
    /// grouped by the level's other output columns.
    Aggregate(rowgate_request::Aggregate, Option<Box<Expr>>),
    /// A value of an embedded resource's row, by a correlated subquery: a to-one spread
    /// column (`...rel(col)`), a to-one embedded column ordered by (`order=rel(col)`), or
    /// with `many` the array of that value over a to-many embed's rows (a to-many spread).
    Related {
        /// The embedded resource (its join, conditions, order and window).
        embed: Box<EmbedPlan>,
        /// The value, over the embedded relation's columns.
        expr: Box<Expr>,
        /// Aggregate the values of every related row into a JSON array.
        many: bool,
    },
}

/// A resource embedded through a foreign key, rendered as a JSON object (to-one) or array
/// (to-many) by a correlated subquery.
#[derive(Debug, Clone)]
pub struct EmbedPlan {
    /// The embedded relation.
    pub relation: Arc<Relation>,
    /// Its output columns (which may embed further).
    pub columns: Vec<OutputColumn>,
    /// (parent column, embedded column) pairs the foreign key joins on.
    pub join: Vec<(String, String)>,
    /// One-to-many (an array) rather than many-to-one (an object).
    pub to_many: bool,
    /// Nesting level: the subquery aliases its relation `pgrst_<depth>`, its parent is
    /// `pgrst_<depth - 1>`.
    pub depth: usize,
    /// `embed.col=op.value` filters and `embed.or=(...)` trees.
    pub conditions: Vec<Condition>,
    /// `embed.order=`.
    pub order: Vec<OrderBy>,
    /// `embed.limit=` / `embed.offset=`.
    pub window: RowWindow,
    /// `!inner`: parent rows without a related row are left out.
    pub inner: bool,
    /// Many-to-many: the join table; `join` then pairs parent columns with its columns.
    pub through: Option<Junction>,
    /// A computed relationship: the function of the parent's row whose result rows are the
    /// embedded ones (`join` is then empty).
    pub computed: Option<crate::schema::QualifiedName>,
}

/// The join table of a many-to-many embed.
#[derive(Debug, Clone)]
pub struct Junction {
    /// The join table.
    pub relation: Arc<Relation>,
    /// (join-table column, embedded column) pairs.
    pub to_child: Vec<(String, String)>,
}

/// One output column: its JSON key, expression, and how its values render.
#[derive(Debug, Clone)]
pub struct OutputColumn {
    /// The key in the JSON object (or CSV header).
    pub key: String,
    /// The expression selected.
    pub expr: Expr,
    /// How values render.
    pub kind: ValueKind,
}

impl OutputColumn {
    /// Whether the column appears in the response: an empty embed (`rel()`) only filters.
    pub fn is_output(&self) -> bool {
        !matches!(&self.expr, Expr::Embed(e) if e.columns.is_empty())
    }
}

/// A boolean condition of `WHERE`.
#[derive(Debug, Clone)]
pub enum Condition {
    /// One filter on an expression of known kind.
    Filter {
        /// The filtered expression.
        expr: Expr,
        /// Its value kind (decides `to_tsvector` wrapping for full-text search).
        kind: ValueKind,
        /// The filter as parsed.
        filter: Filter,
    },
    /// `[NOT] EXISTS` a row of an embedded resource: `!inner`, `embed=not.is.null`.
    Exists {
        /// The embedded resource, with its join and its own conditions.
        embed: Box<EmbedPlan>,
        /// `NOT EXISTS` (`embed=is.null`).
        negated: bool,
    },
    /// `[NOT] (a AND/OR b ...)`.
    Logic {
        /// `not.` given.
        negated: bool,
        /// `and` or `or`.
        op: LogicOp,
        /// Operands.
        children: Vec<Condition>,
    },
}

/// One `ORDER BY` term.
#[derive(Debug, Clone)]
pub struct OrderBy {
    /// The expression.
    pub expr: Expr,
    /// The term as parsed (direction and nulls).
    pub term: OrderTerm,
}

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
            Method::Options => {
                let w = relation.writable;
                let table = matches!(relation.kind, RelationKind::Table | RelationKind::PartitionedTable);
                return Ok(Plan::Options(
                    match (table || (w.insert && w.update && w.delete), w.insert, w.update, w.delete) {
                        (true, ..) => "OPTIONS,GET,HEAD,POST,PUT,PATCH,DELETE",
                        (false, true, true, false) => "OPTIONS,GET,HEAD,POST,PUT,PATCH",
                        (false, true, false, true) => "OPTIONS,GET,HEAD,POST,DELETE",
                        (false, true, false, false) => "OPTIONS,GET,HEAD,POST",
                        (false, false, true, true) => "OPTIONS,GET,HEAD,PATCH,DELETE",
                        (false, false, true, false) => "OPTIONS,GET,HEAD,PATCH",
                        (false, false, false, true) => "OPTIONS,GET,HEAD,DELETE",
                        _ => "OPTIONS,GET,HEAD",
                    },
                ));
            }
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

/// Validates the preferences a read honours and lists them for `Preference-Applied`:
/// `handling=strict` turns an invalid one into 400 PGRST122, otherwise it is ignored.
fn preferences(prefs: &Preferences, schema: &SchemaCache) -> Result<(Option<String>, Vec<String>), Error> {
    let (timezone, invalid) = check_timezone(prefs, schema);
    reject_invalid(prefs, &invalid)?;
    // PostgREST's order: count, handling, timezone (the others do not apply to reads).
    let mut applied = Vec::new();
    if let Some(count) = prefs.count {
        applied.push(count_name(count).to_owned());
    }
    if let Some(handling) = prefs.handling {
        applied.push(
            match handling {
                PreferHandling::Strict => "handling=strict",
                PreferHandling::Lenient => "handling=lenient",
            }
            .to_owned(),
        );
    }
    if let Some(tz) = &timezone {
        applied.push(format!("timezone={tz}"));
    }
    Ok((timezone, applied))
}

/// The end of `Preference-Applied` for writes and calls, in PostgREST's order: `tx` (when it
/// was honoured), `handling`, `timezone`, then `max-affected` (PostgREST 12.2).
fn applied_tail(
    applied: &mut Vec<String>,
    tx: Option<bool>,
    prefs: &Preferences,
    timezone: &Option<String>,
    max_affected: Option<u64>,
) {
    if let Some(rollback) = tx {
        applied.push(if rollback { "tx=rollback" } else { "tx=commit" }.to_owned());
    }
    if let Some(h) = prefs.handling {
        applied.push(
            if h == PreferHandling::Strict { "handling=strict" } else { "handling=lenient" }.to_owned(),
        );
    }
    if let Some(tz) = timezone {
        applied.push(format!("timezone={tz}"));
    }
    if let Some(n) = max_affected {
        applied.push(format!("max-affected={n}"));
    }
}

/// The `Preference-Applied` spelling of a count preference.
fn count_name(count: PreferCount) -> &'static str {
    match count {
        PreferCount::Exact => "count=exact",
        PreferCount::Planned => "count=planned",
        PreferCount::Estimated => "count=estimated",
    }
}

/// The requested time zone if PostgreSQL knows it, and the preferences that are invalid
/// (the unknown ones, and an unknown time zone).
fn check_timezone(prefs: &Preferences, schema: &SchemaCache) -> (Option<String>, Vec<String>) {
    let mut invalid = prefs.invalid.clone();
    let timezone = match &prefs.timezone {
        Some(tz) if schema.timezones.contains(tz) => Some(tz.clone()),
        Some(tz) => {
            invalid.push(format!("timezone={tz}"));
            None
        }
        None => None,
    };
    (timezone, invalid)
}

/// With `handling=strict`, invalid preferences are 400 PGRST122; otherwise they are ignored.
fn reject_invalid(prefs: &Preferences, invalid: &[String]) -> Result<(), Error> {
    if prefs.handling == Some(PreferHandling::Strict) && !invalid.is_empty() {
        return Err(Error::Api {
            code: code::INVALID_PREFERENCES,
            message: "Invalid preferences given with handling=strict".into(),
            details: Some(format!("Invalid preferences: {}", invalid.join(", "))),
            hint: None,
        });
    }
    Ok(())
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

/// Resolves names of one relation.
struct Planner<'a> {
    relation: &'a Relation,
    types: &'a SchemaCache,
    /// The schema the request runs in (embedded relations are looked up there).
    schema: &'a str,
    /// Nesting level of embeds (0 for the top-level relation), which names its SQL alias.
    depth: usize,
    /// The query string, for the filters, order and limits of this level.
    query: &'a rowgate_request::QueryParams,
    /// The embed paths that name this level (by alias and by name); `[[]]` at the top.
    paths: Vec<EmbedPath>,
    /// What column errors call the relation, if not its name (`pgrst_call` for a function's
    /// rows, as PostgREST's messages do).
    label: Option<&'a str>,
    /// `db-aggregates-enabled`.
    aggregates: bool,
}

/// The conditions the top-level filters and logic trees of `query` put on `relation` (an
/// access rule's row filter): the same names, operators and errors as a request's.
pub fn row_filter(
    relation: &Relation,
    schema: &SchemaCache,
    query: &rowgate_request::QueryParams,
    config: &Config,
) -> Result<Vec<Condition>, Error> {
    let planner = Planner::top(relation, schema, &relation.name.schema, query, config);
    Ok(planner.level(&[])?.0)
}

impl<'a> Planner<'a> {
    /// The planner of a request's top-level relation.
    fn top(
        relation: &'a Relation,
        types: &'a SchemaCache,
        schema: &'a str,
        query: &'a rowgate_request::QueryParams,
        config: &Config,
    ) -> Self {
        Planner {
            relation,
            types,
            schema,
            depth: 0,
            query,
            paths: vec![Vec::new()],
            label: None,
            aggregates: config.db_aggregates_enabled,
        }
    }

    fn column(&self, name: &str) -> Result<&Column, Error> {
        self.relation.column(name).ok_or_else(|| {
            let rel = self.label.unwrap_or(&self.relation.name.name);
            let e =
                Error::sql(sqlstate::UNDEFINED_COLUMN, format!("column {rel}.{name} does not exist"), false);
            match crate::schema::closest(name, self.relation.columns.iter().map(|c| c.name.as_str())) {
                Some(c) => e.with_hint(format!("Perhaps you meant to reference the column \"{rel}.{c}\".")),
                None => e,
            }
        })
    }

    /// A field's expression and the kind of its values.
    fn field(&self, field: &Field) -> Result<(Expr, ValueKind), Error> {
        if self.relation.column(&field.name).is_none() && field.json_path.is_empty() {
            // A computed field: a function of this relation's row returning one value.
            if let Some(f) = self.types.computed(self.relation, &field.name) {
                if let (false, crate::schema::FunctionResult::Scalar(kind)) = (f.returns_set, &f.returns) {
                    return Ok((Expr::Computed { function: f.name.clone(), depth: self.depth }, *kind));
                }
            }
        }
        let column = self.column(&field.name)?;
        match field.json_path.last() {
            None => Ok((Expr::Column(column.name.clone()), column.kind)),
            Some(last) => {
                let kind = if last.as_text {
                    ValueKind::Text
                } else if column.kind == ValueKind::Json {
                    ValueKind::Json
                } else {
                    // `->` on jsonb, and on composite or array columns via `to_jsonb`.
                    ValueKind::Jsonb
                };
                let expr = Expr::JsonPath {
                    column: column.name.clone(),
                    steps: field.json_path.clone(),
                    to_jsonb: column.kind == ValueKind::Other,
                };
                Ok((expr, kind))
            }
        }
    }

    fn cast(&self, expr: Expr, kind: ValueKind, cast: &Option<String>) -> Result<(Expr, ValueKind), Error> {
        let Some(ty) = cast else { return Ok((expr, kind)) };
        let base = ty.strip_suffix("[]").unwrap_or(ty).trim().to_ascii_lowercase();
        if !self.types.type_names.contains(&base) {
            return Err(Error::sql(
                sqlstate::UNDEFINED_OBJECT,
                format!("type \"{ty}\" does not exist"),
                false,
            ));
        }
        let kind = if ty.ends_with("[]") { ValueKind::Other } else { cast_kind(&base) };
        Ok((Expr::Cast(Box::new(expr), ty.to_ascii_lowercase()), kind))
    }

    fn columns(&self, select: &[SelectItem]) -> Result<Vec<OutputColumn>, Error> {
        let mut out = Vec::new();
        for item in select {
            match item {
                SelectItem::Star => out.extend(self.relation.columns.iter().map(|c| OutputColumn {
                    key: c.name.clone(),
                    expr: Expr::Column(c.name.clone()),
                    kind: c.kind,
                })),
                // `col::a::b` without an aggregate: both casts, in order.
                SelectItem::Field { field, alias, cast, aggregate: None, aggregate_cast } => {
                    let (expr, kind) = self.field(field)?;
                    let (expr, kind) = self.cast(expr, kind, cast)?;
                    let (expr, kind) = self.cast(expr, kind, aggregate_cast)?;
                    let key = alias.clone().unwrap_or_else(|| output_name(field));
                    out.push(OutputColumn { key, expr, kind });
                }
                SelectItem::Field { .. } | SelectItem::CountAll { .. } if !self.aggregates => {
                    return Err(Error::api(
                        code::AGGREGATES_DISABLED,
                        "Use of aggregate functions is not allowed",
                    ))
                }
                SelectItem::CountAll { alias, cast } => {
                    let expr = Expr::Aggregate(rowgate_request::Aggregate::Count, None);
                    let (expr, kind) = self.cast(expr, ValueKind::Int8, cast)?;
                    out.push(OutputColumn {
                        key: alias.clone().unwrap_or_else(|| "count".into()),
                        expr,
                        kind,
                    });
                }
                SelectItem::Field { field, alias, cast, aggregate: Some(agg), aggregate_cast } => {
                    use rowgate_request::Aggregate as A;
                    let (arg, arg_kind) = self.field(field)?;
                    let (arg, arg_kind) = self.cast(arg, arg_kind, cast)?;
                    let kind = match agg {
                        A::Count => ValueKind::Int8,
                        A::Min | A::Max => arg_kind,
                        // sum(int4) is int8, sum(int8) numeric, avg numeric or float: to_json decides.
                        A::Sum | A::Avg => ValueKind::Other,
                    };
                    let expr = Expr::Aggregate(*agg, Some(Box::new(arg)));
                    let (expr, kind) = self.cast(expr, kind, aggregate_cast)?;
                    let name = match agg {
                        A::Count => "count",
                        A::Sum => "sum",
                        A::Avg => "avg",
                        A::Max => "max",
                        A::Min => "min",
                    };
                    out.push(OutputColumn { key: alias.clone().unwrap_or_else(|| name.into()), expr, kind });
                }
                SelectItem::Embed(embed) if embed.spread => out.extend(spread(self.embed(embed)?)),
                SelectItem::Embed(embed) => out.push(self.embed(embed)?),
            }
        }
        Ok(out)
    }

    /// Plans an embedded resource found through a foreign key between this relation and it.
    fn embed(&self, embed: &rowgate_request::Embed) -> Result<OutputColumn, Error> {
        let unsupported = |what: &str| {
            Error::api(
                code::UNSUPPORTED,
                format!("{what} in resource embedding is not supported by this version of rowgate yet"),
            )
        };
        if self.depth >= 16 {
            return Err(unsupported("Nesting deeper than 16 levels"));
        }
        let parent = &self.relation.name;
        let no_relationship = || {
            Error::Api {
            code: code::NO_RELATIONSHIP,
            message: format!(
                "Could not find a relationship between '{}' and '{}' in the schema cache",
                parent.name, embed.name
            ),
            details: Some(format!(
                "Searched for a foreign key relationship between '{}' and '{}' in the schema '{}', but no matches were found.",
                parent.name, embed.name, self.schema
            )),
            hint: None,
        }
        };
        let computed_child = self.types.computed(self.relation, &embed.name).and_then(|f| match &f.returns {
            crate::schema::FunctionResult::Composite(q) => self.types.relations.get(q),
            _ => None,
        });
        let child = match computed_child {
            Some(c) => c.clone(),
            None => self.types.relation(self.schema, &embed.name).ok_or_else(no_relationship)?.clone(),
        };
        let matches_hint = |fk: &crate::schema::ForeignKey| match &embed.hint {
            None => true,
            Some(h) => fk.name == *h || fk.columns.iter().any(|c| c == h),
        };
        use crate::schema::ForeignKey;
        // Direct foreign keys either way, and join tables whose primary key holds a foreign
        // key to each side (PostgREST's many-to-many).
        enum Candidate<'r> {
            Direct { to_many: bool, fk: &'r ForeignKey },
            Junction { table: &'r Arc<Relation>, to_parent: &'r ForeignKey, to_child: &'r ForeignKey },
            Computed { function: &'r crate::schema::Function },
        }
        let mut candidates: Vec<Candidate> = Vec::new();
        // A computed relationship (a function of the parent's row returning the embedded
        // relation's rows) takes precedence over foreign keys, as in PostgREST.
        if let Some(f) = self.types.computed(self.relation, &embed.name) {
            if matches!(&f.returns, crate::schema::FunctionResult::Composite(_)) {
                candidates.push(Candidate::Computed { function: f });
            }
        }
        for fk in &self.relation.foreign_keys {
            if fk.target == child.name && matches_hint(fk) {
                candidates.push(Candidate::Direct { to_many: false, fk });
            }
        }
        for fk in &child.foreign_keys {
            let seen = candidates
                .iter()
                .any(|c| matches!(c, Candidate::Direct { fk: d, .. } if std::ptr::eq(*d, fk)));
            if fk.target == *parent && matches_hint(fk) && !seen {
                candidates.push(Candidate::Direct { to_many: true, fk });
            }
        }
        let direct = !candidates.is_empty();
        if let Some(Candidate::Computed { .. }) = candidates.first() {
            candidates.truncate(1);
        }
        if !direct {
            let in_key =
                |table: &Relation, fk: &ForeignKey| fk.columns.iter().all(|c| table.primary_key.contains(c));
            let mut tables: Vec<&Arc<Relation>> =
                self.types.relations.values().filter(|r| r.name.schema == self.schema).collect();
            tables.sort_by(|a, b| a.name.cmp(&b.name));
            for table in tables {
                let hinted = embed.hint.as_ref().is_none_or(|h| *h == table.name.name);
                for to_parent in
                    table.foreign_keys.iter().filter(|fk| fk.target == *parent && in_key(table, fk))
                {
                    for to_child in
                        table.foreign_keys.iter().filter(|fk| fk.target == child.name && in_key(table, fk))
                    {
                        if hinted && !std::ptr::eq(to_parent, to_child) {
                            candidates.push(Candidate::Junction { table, to_parent, to_child });
                        }
                    }
                }
            }
        }
        let chosen = match candidates.len() {
            0 => return Err(no_relationship()),
            1 => candidates.remove(0),
            _ => {
                let details: Vec<String> = candidates
                    .iter()
                    .map(|c| match c {
                        Candidate::Direct { fk, .. } => fk.name.clone(),
                        Candidate::Junction { table, .. } => table.name.name.clone(),
                        Candidate::Computed { function } => function.name.name.clone(),
                    })
                    .collect();
                return Err(Error::Api {
                    code: code::AMBIGUOUS_EMBED,
                    message: format!(
                        "Could not embed because more than one relationship was found for '{}' and '{}'",
                        parent.name, embed.name
                    ),
                    details: Some(format!("Candidate relationships: {}", details.join(", "))),
                    hint: Some(format!(
                        "Try changing '{}' to one of the relationships, e.g. '{}!{}'",
                        embed.name, embed.name, details[0]
                    )),
                });
            }
        };
        let mut computed = None;
        let (to_many, join, through) = match chosen {
            Candidate::Computed { function } => {
                computed = Some(function.name.clone());
                // `ROWS 1` on a set-returning function declares at most one row: to-one.
                (function.returns_set && function.rows != 1.0, Vec::new(), None)
            }
            // The child references the parent: pairs of (parent column, child column). When the
            // referencing columns are unique in the child, there is at most one: one-to-one.
            Candidate::Direct { to_many: true, fk } => {
                let unique = |key: &Vec<String>| {
                    !key.is_empty()
                        && key.len() == fk.columns.len()
                        && key.iter().all(|k| fk.columns.contains(k))
                };
                let one_to_one = unique(&child.primary_key) || child.unique_keys.iter().any(unique);
                (
                    !one_to_one,
                    fk.target_columns.iter().cloned().zip(fk.columns.iter().cloned()).collect(),
                    None,
                )
            }
            Candidate::Direct { to_many: false, fk } => {
                (false, fk.columns.iter().cloned().zip(fk.target_columns.iter().cloned()).collect(), None)
            }
            Candidate::Junction { table, to_parent, to_child } => {
                let junction = Junction {
                    relation: table.clone(),
                    // (join-table column, child column)
                    to_child: to_child
                        .columns
                        .iter()
                        .cloned()
                        .zip(to_child.target_columns.iter().cloned())
                        .collect(),
                };
                // (parent column, join-table column)
                let join =
                    to_parent.target_columns.iter().cloned().zip(to_parent.columns.iter().cloned()).collect();
                (true, join, Some(junction))
            }
        };
        let paths = self
            .paths
            .iter()
            .flat_map(|p| {
                [embed.alias.as_ref(), Some(&embed.name)].into_iter().flatten().map(move |key| {
                    let mut path = p.clone();
                    path.push(key.clone());
                    path
                })
            })
            .collect();
        let inner = Planner {
            relation: &child,
            types: self.types,
            schema: self.schema,
            depth: self.depth + 1,
            query: self.query,
            paths,
            label: None,
            aggregates: self.aggregates,
        };

        let window = inner
            .query
            .ranges
            .iter()
            .find(|(p, _)| inner.paths.contains(p))
            .map(|(_, lo)| RowWindow { offset: lo.offset.unwrap_or(0), limit: lo.limit })
            .unwrap_or(RowWindow { offset: 0, limit: None });
        // `rel()` selects nothing: it only filters, and is left out of the response.
        let columns = inner.columns(&embed.select)?;
        let (mut conditions, order) = inner.level(&columns)?;
        conditions.extend(inner_joins(&columns));
        let plan = EmbedPlan {
            relation: child.clone(),
            columns,
            join,
            to_many,
            depth: self.depth + 1,
            conditions,
            order,
            window,
            inner: embed.join == Some(rowgate_request::JoinType::Inner),
            through,
            computed,
        };
        Ok(OutputColumn {
            key: embed.alias.clone().unwrap_or_else(|| embed.name.clone()),
            expr: Expr::Embed(Box::new(plan)),
            kind: ValueKind::Json,
        })
    }

    /// The conditions and order terms the query string gives this level.
    fn level(&self, columns: &[OutputColumn]) -> Result<(Vec<Condition>, Vec<OrderBy>), Error> {
        let here = |p: &EmbedPath| self.paths.contains(p);
        let mut conditions = Vec::new();
        for (_, filter) in self.query.filters.iter().filter(|(p, _)| here(p)) {
            conditions.push(self.filter(filter, columns)?);
        }
        for (_, tree) in self.query.logic.iter().filter(|(p, _)| here(p)) {
            conditions.push(self.logic(tree, columns)?);
        }
        let mut order = Vec::new();
        for (_, terms) in self.query.order.iter().filter(|(p, _)| here(p)) {
            for term in terms {
                order.push(self.order(term, columns)?);
            }
        }
        Ok((conditions, order))
    }

    /// A filter; `embed=is.null` / `embed=not.is.null` on an embedded resource of `columns`
    /// keeps the rows without / with a related row, as PostgREST does.
    fn filter(&self, filter: &Filter, columns: &[OutputColumn]) -> Result<Condition, Error> {
        if let (true, Operation::Is(v @ (IsValue::Null | IsValue::NotNull))) =
            (filter.field.json_path.is_empty(), &filter.operation)
        {
            let embed = columns.iter().find_map(|c| match &c.expr {
                Expr::Embed(e) if c.key == filter.field.name || e.relation.name.name == filter.field.name => {
                    Some(e)
                }
                _ => None,
            });
            if let Some(e) = embed {
                let wants_rows = (*v == IsValue::NotNull) != filter.negated;
                return Ok(Condition::Exists { embed: e.clone(), negated: !wants_rows });
            }
        }
        let (expr, kind) = self.field(&filter.field)?;
        Ok(Condition::Filter { expr, kind, filter: filter.clone() })
    }

    fn logic(&self, tree: &LogicTree, columns: &[OutputColumn]) -> Result<Condition, Error> {
        match tree {
            LogicTree::Filter(f) => self.filter(f, columns),
            LogicTree::Expr { negated, op, children } => Ok(Condition::Logic {
                negated: *negated,
                op: *op,
                children: children.iter().map(|c| self.logic(c, columns)).collect::<Result<_, _>>()?,
            }),
        }
    }

    /// An order term; `rel(col)` orders by a column of a to-one embedded resource of `columns`.
    fn order(&self, term: &OrderTerm, columns: &[OutputColumn]) -> Result<OrderBy, Error> {
        let Some(rel) = &term.relation else {
            let (expr, _) = self.field(&term.field)?;
            return Ok(OrderBy { expr, term: term.clone() });
        };
        let embed = columns.iter().find_map(|c| match &c.expr {
            Expr::Embed(e) if c.key == *rel || e.relation.name.name == *rel => Some(e),
            Expr::Related { embed, .. } if embed.relation.name.name == *rel => Some(embed),
            _ => None,
        });
        let Some(embed) = embed else {
            return Err(not_embedded(&vec![rel.clone()], rel));
        };
        if embed.to_many {
            return Err(Error::Api {
                code: code::RELATED_ORDER,
                message: format!("A related order on '{rel}' is not possible"),
                details: Some(format!(
                    "'{}' and '{rel}' do not form a many-to-one or one-to-one relationship",
                    self.relation.name.name
                )),
                hint: None,
            });
        }
        let inner = Planner {
            relation: &embed.relation,
            types: self.types,
            schema: self.schema,
            depth: embed.depth,
            query: self.query,
            paths: Vec::new(),
            label: None,
            aggregates: self.aggregates,
        };
        let (expr, _) = inner.field(&term.field)?;
        let mut related = embed.clone();
        related.columns.clear();
        Ok(OrderBy {
            expr: Expr::Related { embed: related, expr: Box::new(expr), many: false },
            term: term.clone(),
        })
    }
}

/// The columns a spread `...rel(cols)` lifts into its parent: each a value of the one related
/// row, or for a to-many relationship the array of its values over every related row.
fn spread(embed: OutputColumn) -> Vec<OutputColumn> {
    let Expr::Embed(mut plan) = embed.expr else { return vec![embed] };
    let columns = std::mem::take(&mut plan.columns);
    columns
        .into_iter()
        .filter(OutputColumn::is_output)
        .map(|c| OutputColumn {
            key: c.key,
            kind: if plan.to_many { ValueKind::Json } else { c.kind },
            expr: Expr::Related { embed: plan.clone(), expr: Box::new(c.expr), many: plan.to_many },
        })
        .collect()
}

/// `EXISTS` conditions for the `!inner` embeds among `columns`.
fn inner_joins(columns: &[OutputColumn]) -> Vec<Condition> {
    columns
        .iter()
        .filter_map(|c| match &c.expr {
            Expr::Embed(e) if e.inner => Some(Condition::Exists { embed: e.clone(), negated: false }),
            _ => None,
        })
        .collect()
}

/// The JSON key of an unaliased field: the last object key of its JSON path (an index names
/// nothing), else the column, as PostgREST names it.
fn output_name(field: &Field) -> String {
    field
        .json_path
        .iter()
        .rev()
        .find_map(|step| match &step.key {
            rowgate_request::JsonKey::Key(k) => Some(k.clone()),
            rowgate_request::JsonKey::Index(_) => None,
        })
        .unwrap_or_else(|| field.name.clone())
}

/// The value kind of a cast target, for the types rowgate renders itself.
fn cast_kind(ty: &str) -> ValueKind {
    match ty {
        "int2" | "smallint" => ValueKind::Int2,
        "int4" | "int" | "integer" => ValueKind::Int4,
        "int8" | "bigint" => ValueKind::Int8,
        "numeric" | "decimal" => ValueKind::Numeric,
        "bool" | "boolean" => ValueKind::Bool,
        "text" | "varchar" | "character varying" | "name" => ValueKind::Text,
        "uuid" => ValueKind::Uuid,
        "date" => ValueKind::Date,
        "timestamp" | "timestamp without time zone" => ValueKind::Timestamp,
        "json" => ValueKind::Json,
        "jsonb" => ValueKind::Jsonb,
        _ => ValueKind::Other,
    }
}
