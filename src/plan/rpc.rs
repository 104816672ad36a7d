//! `/rpc/{function}`: the overload chosen by argument names (PGRST202/203), the arguments
//! taken from the query string (GET) or the body (POST), and the result read like a relation:
//! a table-valued function's rows take every read feature, embedding included.

use std::sync::Arc;

use rowgate_request::{ApiRequest, Method, PreferHandling, PreferTx, SelectItem};

use super::payload;
use super::{
    range, ArgValue, Call, CallArgs, Media, OutputColumn, Planner, ReadPlan, ResultShape, RpcTransaction,
};
use crate::config::{Config, TxEnd};
use crate::error::{code, Error};
use crate::schema::{
    Column, Function, FunctionResult, QualifiedName, Relation, RelationKind, SchemaCache, ValueKind,
    Volatility,
};

/// The column a scalar result is read as (PostgREST's name, which its CSV header shows).
pub const SCALAR_COLUMN: &str = "pgrst_scalar";

/// Plans a call of `schema_name.name`.
pub(super) fn plan(
    request: &ApiRequest,
    body: &[u8],
    schema: &SchemaCache,
    config: &Config,
    schema_name: &str,
    name: &str,
) -> Result<ReadPlan, Error> {
    let post = matches!(request.method, Method::Post);
    if !matches!(request.method, Method::Get | Method::Head | Method::Post) {
        let method = format!("{:?}", request.method).to_uppercase();
        return Err(Error::api(code::INVALID_RPC_METHOD, format!("Cannot use the {method} method on RPC")));
    }
    let qualified = QualifiedName { schema: schema_name.to_owned(), name: name.to_owned() };
    let overloads = schema.functions.get(&qualified).map(Vec::as_slice).unwrap_or(&[]);

    // A raw body (bytes, text, XML) goes whole to a function's single unnamed parameter of
    // that type.
    let raw_type = match request.content_type.as_deref() {
        Some("application/octet-stream") if post => Some("bytea"),
        Some("text/plain") if post => Some("text"),
        Some("text/xml") if post => Some("xml"),
        _ => None,
    };
    if let Some(type_name) = raw_type {
        return plan_call(
            request,
            schema,
            config,
            &qualified,
            raw_call(overloads, type_name, body, &qualified)?,
        );
    }
    // The argument names the request gives, and where their values come from.
    let json_body =
        post && !matches!(request.content_type.as_deref(), Some("application/x-www-form-urlencoded"));
    let empty = body.iter().all(u8::is_ascii_whitespace);
    let array = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    // A JSON array for a function without a single json parameter: PostgREST calls it with
    // the first object.
    let first: Vec<u8>;
    let first_object = json_body && array && !overloads.iter().any(single_json_arg);
    let body = match first_object {
        true => {
            payload::check_depth(body)?;
            let items: Vec<serde_json::Value> = serde_json::from_slice(body).map_err(|_| {
                Error::Request(rowgate_request::RequestError::InvalidBody("Empty or invalid json".into()))
            })?;
            first = items.into_iter().next().map_or_else(|| b"{}".to_vec(), |v| v.to_string().into_bytes());
            &first[..]
        }
        false => body,
    };
    let array = array && !first_object;
    let (given, source) = if post {
        if json_body && array {
            // A JSON array goes whole to a single unnamed json parameter, if there is one.
            payload::check_depth(body)?;
            serde_json::from_slice::<serde::de::IgnoredAny>(body).map_err(|_| {
                Error::Request(rowgate_request::RequestError::InvalidBody("Empty or invalid json".into()))
            })?;
            (Vec::new(), Source::Body(String::from_utf8_lossy(body).into_owned()))
        } else {
            // No body means no arguments (for JSON; an empty form is already no arguments).
            let text = if empty && json_body { &b"{}"[..] } else { body };
            let p = payload::parse(request.content_type.as_deref(), text, false, usize::MAX)?;
            let raw = String::from_utf8_lossy(text).into_owned();
            (p.keys.clone(), if json_body { Source::Json(p, raw) } else { Source::Form(p) })
        }
    } else {
        let mut seen = std::collections::HashSet::new();
        let names: Vec<String> =
            request.query.rpc_params.iter().filter(|(k, _)| seen.insert(k)).map(|(k, _)| k.clone()).collect();
        (names, Source::Query)
    };

    let whole_body = matches!(source, Source::Body(_));
    let function = choose(overloads, &given, json_body, whole_body, &qualified, schema)?;
    let args = call_args(function, &given, source, request)?;
    plan_call(request, schema, config, &qualified, (function, args))
}

/// The function with a single unnamed parameter of `type_name` that takes a raw body, and the
/// body as its argument; PGRST202 if there is none.
fn raw_call<'f>(
    overloads: &'f [Function],
    type_name: &str,
    body: &[u8],
    name: &QualifiedName,
) -> Result<(&'f Function, CallArgs), Error> {
    let takes =
        |f: &&Function| matches!(f.args.as_slice(), [a] if a.name.is_empty() && a.type_name == type_name);
    let Some(function) = overloads.iter().find(takes) else {
        let qualified = format!("{}.{}", name.schema, name.name);
        return Err(Error::Api {
            code: code::FUNCTION_NOT_FOUND,
            message: format!("Could not find the function {qualified} in the schema cache"),
            details: Some(
                format!(
                    "Searched for the function {qualified} with a single unnamed {type_name} parameter, but no matches \
                     were found in the schema cache."
                )
                .into(),
            ),
            hint: None,
        });
    };
    // Bytes as bytea's hex input; text and XML must be UTF-8, as the database's text is.
    let payload = match type_name {
        "bytea" => {
            let mut hex = String::with_capacity(2 + 2 * body.len());
            hex.push_str("\\x");
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            for b in body {
                hex.push(char::from(DIGITS[usize::from(b >> 4)]));
                hex.push(char::from(DIGITS[usize::from(b & 15)]));
            }
            hex
        }
        _ => String::from_utf8(body.to_vec()).map_err(|_| {
            Error::Request(rowgate_request::RequestError::InvalidBody("The body is not valid UTF-8".into()))
        })?,
    };
    Ok((function, CallArgs::Body { payload, type_name: type_name.to_owned() }))
}

/// The read plan of calling `function` with `args`.
fn plan_call(
    request: &ApiRequest,
    schema: &SchemaCache,
    config: &Config,
    qualified: &QualifiedName,
    (function, args): (&Function, CallArgs),
) -> Result<ReadPlan, Error> {
    let schema_name = qualified.schema.as_str();
    let post = matches!(request.method, Method::Post);
    let (relation, result, columns) = result_relation(function, schema)?;
    // A function returning a table's rows is that table, for handlers (as PostgREST has it).
    let identifier = match &function.returns {
        crate::schema::FunctionResult::Composite(table) => table.clone(),
        _ => function.name.clone(),
    };
    let (media, explain, handler) = super::negotiate(request, schema, config, &identifier)?;

    let mut planner = Planner::top(&relation, schema, schema_name, &request.query, config);
    planner.label = Some("pgrst_call");
    let columns = match columns {
        Some(scalar) => scalar,
        None if request.query.select.is_empty() => planner.columns(&[SelectItem::Star])?,
        None => planner.columns(&request.query.select)?,
    };
    let (mut conditions, order) = planner.level(&columns)?;
    conditions.extend(super::inner_joins(&columns));
    let window = range::window(request, config.db.max_rows)?;

    let (timezone, mut invalid) = super::check_timezone(&request.preferences, schema);
    let prefs = &request.preferences;
    let overridable = matches!(config.db.tx_end, TxEnd::CommitAllowOverride | TxEnd::RollbackAllowOverride);
    let rollback = match (overridable, prefs.tx) {
        (true, Some(tx)) => tx == PreferTx::Rollback,
        _ => matches!(config.db.tx_end, TxEnd::Rollback | TxEnd::RollbackAllowOverride),
    };
    if prefs.tx.is_some() && !(overridable && post) {
        invalid
            .push(format!("tx={}", if prefs.tx == Some(PreferTx::Commit) { "commit" } else { "rollback" }));
    }
    super::reject_invalid(prefs, &invalid)?;
    let strict = prefs.handling == Some(PreferHandling::Strict);
    let max_affected = prefs.max_affected.filter(|_| strict && post).map(|n| n.max(0) as u64);
    if max_affected.is_some() && !function.returns_set {
        return Err(Error::api(
            code::MAX_AFFECTED_NOT_SET,
            "Function must return SETOF or TABLE when max-affected preference is used with handling=strict",
        ));
    }
    let mut applied = Vec::new();
    if let Some(c) = prefs.count {
        applied.push(super::count_name(c).to_owned());
    }
    let tx = (post && overridable && prefs.tx.is_some()).then_some(rollback);
    super::applied_tail(&mut applied, tx, prefs, &timezone, max_affected);

    Ok(ReadPlan {
        relation,
        schema: schema_name.to_owned(),
        columns,
        conditions,
        order,
        window,
        count: prefs.count,
        media: if result == ResultShape::Rows { media } else { scalar_media(media) },
        head: request.method == Method::Head,
        timezone,
        applied,
        call: Some(Call {
            function: function.name.clone(),
            args,
            scalar: matches!(result, ResultShape::Scalar | ResultShape::ScalarSet | ResultShape::Void),
            volatile: function.volatility == Volatility::Volatile,
            sets_response: function.sets_response,
        }),
        result,
        transaction: post.then_some(RpcTransaction {
            read_only: function.volatility != Volatility::Volatile,
            rollback,
            max_affected,
        }),
        explain,
        postgis: schema.postgis.clone(),
        handler,
    })
}

/// `OPTIONS /rpc/fn`: the methods the overload without arguments takes (PGRST202 if there is
/// none), as PostgREST answers.
pub(super) fn allow(schema: &SchemaCache, schema_name: &str, name: &str) -> Result<&'static str, Error> {
    let qualified = QualifiedName { schema: schema_name.to_owned(), name: name.to_owned() };
    let overloads = schema.functions.get(&qualified).map(Vec::as_slice).unwrap_or(&[]);
    let f = choose(overloads, &[], false, false, &qualified, schema)?;
    Ok(if f.volatility == Volatility::Volatile { "OPTIONS,POST" } else { "OPTIONS,GET,HEAD,POST" })
}

/// Where the arguments' values are.
enum Source {
    /// The query string (GET, HEAD).
    Query,
    /// A JSON object body (the payload, and the body text as sent).
    Json(payload::Payload, String),
    /// A form body, already a JSON object of strings.
    Form(payload::Payload),
    /// The whole body, for a single unnamed json parameter.
    Body(String),
}

/// The overload whose argument names fit `given`: every given name is an argument and every
/// argument without a default is given. A POST body may also go whole to a function with a
/// single unnamed json or jsonb argument.
fn choose<'f>(
    overloads: &'f [Function],
    given: &[String],
    json_body: bool,
    whole_body: bool,
    name: &QualifiedName,
    schema: &SchemaCache,
) -> Result<&'f Function, Error> {
    // A function's one unnamed parameter (the schema cache keeps no other kind) is named `""`,
    // as PostgREST names it: `{"": value}` gives it; a query string cannot.
    let fits = |f: &&Function| {
        callable(f)
            && given.iter().all(|g| f.args.iter().any(|a| a.name == *g))
            && f.args.iter().all(|a| a.has_default || given.contains(&a.name))
            && (json_body || f.args.iter().all(|a| !a.name.is_empty() || a.has_default))
    };
    let mut candidates: Vec<&Function> =
        if whole_body { Vec::new() } else { overloads.iter().filter(fits).collect() };
    if candidates.is_empty() && json_body {
        candidates = overloads.iter().filter(|f| single_json_arg(f)).collect();
    }
    match candidates.len() {
        1 => Ok(candidates[0]),
        0 => Err(not_found(overloads, given, json_body, name, schema)),
        _ => {
            // In PostgREST's order: by comment, then by parameters (name, then type).
            let mut sorted = candidates.clone();
            sorted.sort_by_key(|f| {
                (
                    f.comment.clone(),
                    f.args.iter().map(|a| (a.name.clone(), a.type_name.clone())).collect::<Vec<_>>(),
                )
            });
            let list: Vec<String> = sorted.iter().map(|f| signature(f, true)).collect();
            Err(Error::Api {
                code: code::AMBIGUOUS_FUNCTION,
                message: format!("Could not choose the best candidate function between: {}", list.join(", ")),
                details: None,
                hint: Some(
                    "Try renaming the parameters or the function itself in the database so function overloading can be resolved"
                        .into(),
                ),
            })
        }
    }
}

/// Whether `/rpc` may call `f`, as PostgREST decides: at most one unnamed parameter, of a type
/// a whole body can be (`bytea`, `json`, `jsonb`, `text`, `xml`) — and here first, since it is
/// passed by position. (A computed field's unnamed row parameter makes it no function to call,
/// only one to select.)
fn callable(f: &Function) -> bool {
    let mut unnamed = f.args.iter().filter(|a| a.name.is_empty());
    match (unnamed.next(), unnamed.next()) {
        (None, _) => true,
        (Some(one), None) => {
            std::ptr::eq(one, &f.args[0])
                && matches!(one.type_name.as_str(), "bytea" | "json" | "jsonb" | "text" | "xml")
        }
        _ => false,
    }
}

fn single_json_arg(f: &Function) -> bool {
    matches!(f.args.as_slice(), [a] if a.name.is_empty() && matches!(a.type_name.as_str(), "json" | "jsonb"))
}

/// `test.pick(x => integer)` (with types) or `test.add_them(a, b)` (names only).
fn signature(f: &Function, types: bool) -> String {
    let args: Vec<String> = f
        .args
        .iter()
        .map(|a| if types { format!("{} => {}", a.name, a.type_name) } else { a.name.clone() })
        .collect();
    format!("{}.{}({})", f.name.schema, f.name.name, args.join(", "))
}

/// PGRST202, worded as PostgREST words it.
fn not_found(
    overloads: &[Function],
    given: &[String],
    json_body: bool,
    name: &QualifiedName,
    schema: &SchemaCache,
) -> Error {
    let qualified = format!("{}.{}", name.schema, name.name);
    let (message, searched) = if given.is_empty() {
        (
            format!("Could not find the function {qualified} without parameters in the schema cache"),
            "without parameters".to_owned(),
        )
    } else {
        let plural = if given.len() == 1 { "parameter" } else { "parameters" };
        (
            format!("Could not find the function {qualified}({}) in the schema cache", given.join(", ")),
            format!("with {plural} {}", given.join(", ")),
        )
    };
    let or_json = if json_body { " or with a single unnamed json/jsonb parameter" } else { "" };
    // Functions `/rpc` cannot call are not suggested (PostgREST keeps them out of its cache).
    let callable_overloads: Vec<&Function> = overloads.iter().filter(|f| callable(f)).collect();
    let hint = if !callable_overloads.is_empty() {
        // The overload whose parameter names, sorted, read most like those given (PostgREST's
        // fuzzy match, which suggests none when none is like enough).
        let sorted = |mut names: Vec<&str>| {
            names.sort_unstable();
            format!("({})", names.join(", "))
        };
        let lists: Vec<String> = callable_overloads
            .iter()
            .map(|f| sorted(f.args.iter().map(|a| a.name.as_str()).collect()))
            .collect();
        let asked = sorted(given.iter().map(String::as_str).collect());
        crate::schema::fuzzy::closest(&asked, lists.iter().map(String::as_str), 0.33)
            .map(|list| format!("Perhaps you meant to call the function {qualified}{list}"))
    } else {
        let names = schema
            .functions
            .iter()
            .filter(|(q, fs)| q.schema == name.schema && fs.iter().any(callable))
            .map(|(q, _)| q.name.as_str());
        crate::schema::similar(&name.name, names)
            .map(|n| format!("Perhaps you meant to call the function {}.{n}", name.schema))
    };
    Error::Api {
        code: code::FUNCTION_NOT_FOUND,
        message,
        details: Some(format!(
            "Searched for the function {qualified} {searched}{or_json}, but no matches were found in the schema cache."
        ).into()),
        hint,
    }
}

/// The call's arguments in the form the SQL stage binds them.
fn call_args(
    function: &Function,
    given: &[String],
    source: Source,
    request: &ApiRequest,
) -> Result<CallArgs, Error> {
    let named = |names: &[String]| -> Vec<crate::schema::FunctionArg> {
        function.args.iter().filter(|a| names.contains(&a.name)).cloned().collect()
    };
    Ok(match source {
        Source::Body(raw) => CallArgs::Body { payload: raw, type_name: function.args[0].type_name.clone() },
        Source::Json(_, raw) if single_json_arg(function) => {
            CallArgs::Body { payload: raw, type_name: function.args[0].type_name.clone() }
        }
        Source::Json(p, _) | Source::Form(p) => CallArgs::Json { payload: p.json, args: named(given) },
        Source::Query => {
            let mut values = Vec::new();
            for arg in named(given) {
                let mut given_values =
                    request.query.rpc_params.iter().filter(|(k, _)| *k == arg.name).map(|(_, v)| v.as_str());
                let value = if arg.variadic {
                    // `?v=1&v=2` is the array {1,2}, each value one element.
                    ArgValue::Many(given_values.map(str::to_owned).collect())
                } else {
                    // Given twice, the last one counts, as in PostgREST.
                    ArgValue::One(given_values.next_back().unwrap_or_default().to_owned())
                };
                values.push((arg, value));
            }
            CallArgs::Text(values)
        }
    })
}

/// The relation the planner reads a result as, its shape, and for scalar results their one
/// output column.
type ResultRelation = (Arc<Relation>, ResultShape, Option<Vec<OutputColumn>>);

/// How `function`'s result is read.
fn result_relation(function: &Function, schema: &SchemaCache) -> Result<ResultRelation, Error> {
    let synthesized =
        |columns: Vec<Column>| Arc::new(Relation::new(function.name.clone(), RelationKind::View, columns));
    let set = function.returns_set;
    Ok(match &function.returns {
        FunctionResult::Composite(rel) => match schema.relations.get(rel) {
            Some(r) => (r.clone(), if set { ResultShape::Rows } else { ResultShape::Object }, None),
            // A composite of a relation outside the exposed schemas: its rows as JSON values.
            None => scalar(function, ValueKind::Other, synthesized),
        },
        FunctionResult::Columns(columns) => {
            (synthesized(columns.clone()), if set { ResultShape::Rows } else { ResultShape::Object }, None)
        }
        FunctionResult::Scalar(kind) => scalar(function, *kind, synthesized),
        FunctionResult::Void => {
            let (rel, _, cols) = scalar(function, ValueKind::Other, synthesized);
            (rel, ResultShape::Void, cols)
        }
    })
}

fn scalar(
    function: &Function,
    kind: ValueKind,
    synthesized: impl Fn(Vec<Column>) -> Arc<Relation>,
) -> ResultRelation {
    let column = Column {
        name: SCALAR_COLUMN.into(),
        type_name: function.return_type.clone(),
        type_oid: function.return_type_oid,
        kind,
        nullable: true,
        default: None,
        comment: None,
        data_type: function.return_type.clone(),
        max_length: None,
        enum_values: Vec::new(),
    };
    let output = vec![OutputColumn {
        key: SCALAR_COLUMN.into(),
        expr: super::Expr::Column(SCALAR_COLUMN.into()),
        kind,
    }];
    let shape = if function.returns_set { ResultShape::ScalarSet } else { ResultShape::Scalar };
    (synthesized(vec![column]), shape, Some(output))
}

/// Scalar results are JSON values whatever the `Accept`, except CSV.
fn scalar_media(media: Media) -> Media {
    match media {
        Media::Csv => Media::Csv,
        _ => Media::Json { strip_nulls: false },
    }
}
