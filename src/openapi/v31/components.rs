//! `components` of the OpenAPI 3.1 description: JSON Schema for PostgreSQL's values, a
//! relation's rows as read, inserted and updated, functions' arguments, the shared parameters,
//! the error object and the security schemes; pruned to what the paths refer to.

use serde_json::{json, Map, Value};

use super::super::types::{element, json_type};
use super::{schema_ref, ComponentNames};
use crate::openapi::Api;
use crate::schema::{Column, Relation};

/// A value of PostgreSQL type `pg` (PostgREST's type name) as JSON Schema; `labels`: an enum's.
/// A composite type is a reference to its component (PostgREST answers its values as objects).
pub(super) fn value_schema(pg: &str, labels: &[String], nullable: bool, names: &ComponentNames) -> Value {
    if let Some(key) = names.composite(pg) {
        let one = schema_ref(key);
        return if nullable { json!({"anyOf": [one, {"type": "null"}]}) } else { one };
    }
    let mut s = Map::new();
    match json_type(pg) {
        None => return json!({}),
        Some("array") => {
            s.insert("type".into(), types("array", nullable));
            s.insert("items".into(), value_schema(element(pg), &[], true, names));
        }
        Some(t) => {
            s.insert("type".into(), types(t, nullable));
            let format = match pg {
                "smallint" | "integer" => Some("int32"),
                "bigint" => Some("int64"),
                "real" => Some("float"),
                "double precision" => Some("double"),
                "uuid" => Some("uuid"),
                "date" => Some("date"),
                "timestamp with time zone" => Some("date-time"),
                _ => None,
            };
            if let Some(f) = format {
                s.insert("format".into(), json!(f));
            }
            if !labels.is_empty() {
                let mut values: Vec<Value> = labels.iter().map(|l| json!(l)).collect();
                if nullable {
                    values.push(Value::Null);
                }
                s.insert("enum".into(), Value::Array(values));
            }
        }
    }
    if !matches!(json_type(pg), Some("string" | "integer" | "number" | "boolean" | "array"))
        || pg.contains('.')
    {
        // Types JSON Schema has no name for keep PostgreSQL's in the description.
        s.insert("description".into(), json!(pg));
    }
    Value::Object(s)
}

fn types(t: &str, nullable: bool) -> Value {
    if nullable {
        json!([t, "null"])
    } else {
        json!(t)
    }
}

/// An object of `columns`; `required`: the non-null ones are.
pub(super) fn object(columns: &[Column], required: bool, names: &ComponentNames) -> Value {
    let props: Map<String, Value> =
        columns.iter().map(|c| (c.name.clone(), column_schema(c, true, names))).collect();
    let mut s = Map::new();
    s.insert("type".into(), json!("object"));
    s.insert("properties".into(), Value::Object(props));
    if required {
        let req: Vec<&str> = columns.iter().filter(|c| !c.nullable).map(|c| c.name.as_str()).collect();
        if !req.is_empty() {
            s.insert("required".into(), json!(req));
        }
    }
    Value::Object(s)
}

/// A default as the schema's `format` requires it, or none: PostgreSQL writes a `timestamptz`
/// as `2020-01-02 03:04:05+00`, which is no RFC 3339 `date-time` until its `T` and offset are
/// put right; an expression (`now()`, `CURRENT_DATE`, `gen_random_uuid()`) is no value of the
/// format at all, and a description whose default fails its own schema is invalid.
fn in_format(format: Option<&str>, default: Value) -> Option<Value> {
    let Value::String(text) = &default else { return Some(default) };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let date = |s: &str| s.len() == 10 && s.split('-').map(digits).filter(|d| *d).count() == 3;
    match format {
        Some("date") => date(text).then_some(default),
        Some("date-time") => {
            let (day, rest) = text.split_once([' ', 'T'])?;
            // The offset: `+00`, `-05:30`, `+05:45:00` (seconds only in old zones), or `Z`.
            let at = rest.rfind(['+', '-', 'Z'])?;
            let (time, offset) = rest.split_at(at);
            let mut clock = time.split(':');
            let whole = |p: Option<&str>| p.is_some_and(|p| p.len() == 2 && digits(p));
            let (h, m, sec) = (clock.next(), clock.next(), clock.next().unwrap_or("00"));
            let (sec_whole, fraction) = sec.split_once('.').unwrap_or((sec, ""));
            if !date(day) || !whole(h) || !whole(m) || !whole(Some(sec_whole)) || clock.next().is_some() {
                return None;
            }
            if !fraction.is_empty() && !digits(fraction) {
                return None;
            }
            let offset = match offset {
                "Z" => "Z".to_owned(),
                o => {
                    let mut parts = o[1..].split(':');
                    let (oh, om) = (parts.next(), parts.next().unwrap_or("00"));
                    if !whole(oh) || !whole(Some(om)) || parts.next().is_some_and(|s| s != "00") {
                        return None;
                    }
                    format!("{}{}:{om}", &o[..1], oh.unwrap_or_default())
                }
            };
            let sec =
                if fraction.is_empty() { sec_whole.to_owned() } else { format!("{sec_whole}.{fraction}") };
            Some(json!(format!("{day}T{}:{}:{sec}{offset}", h.unwrap_or_default(), m.unwrap_or_default())))
        }
        Some("uuid") => {
            let groups: Vec<usize> = text.split('-').map(str::len).collect();
            let hex = text.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit());
            (hex && groups == [8, 4, 4, 4, 12]).then_some(default)
        }
        _ => Some(default),
    }
}

/// A column: its type (with `null` when nullable), comment, default and length.
fn column_schema(column: &Column, with_null: bool, names: &ComponentNames) -> Value {
    let mut s = value_schema(&column.data_type, &column.enum_values, with_null && column.nullable, names);
    if let Value::Object(m) = &mut s {
        if let Some(c) = &column.comment {
            m.insert("description".into(), json!(c));
        }
        if let Some(n) = column.max_length {
            m.insert("maxLength".into(), json!(n));
        }
        if let Some(d) = column
            .default
            .as_deref()
            .and_then(|d| super::super::types::default_value(&column.data_type, d))
            .and_then(|d| in_format(m.get("format").and_then(Value::as_str), d))
        {
            m.insert("default".into(), d);
        }
    }
    s
}

/// A row as read, inserted and updated: every column; non-null ones always present in a row,
/// required in an insert unless they have a default, nothing required in an update.
fn relation_schemas(relation: &Relation, key: &str, names: &ComponentNames, out: &mut Map<String, Value>) {
    let props: Map<String, Value> =
        relation.columns.iter().map(|c| (c.name.clone(), column_schema(c, true, names))).collect();
    let mut row = Map::new();
    if let Some(c) = &relation.comment {
        row.insert("description".into(), json!(c));
    }
    row.insert("type".into(), json!("object"));
    row.insert("properties".into(), Value::Object(props.clone()));
    let present: Vec<&str> =
        relation.columns.iter().filter(|c| !c.nullable).map(|c| c.name.as_str()).collect();
    if !present.is_empty() {
        row.insert("required".into(), json!(present));
    }
    out.insert(key.to_owned(), Value::Object(row));
    let needed: Vec<&str> = relation
        .columns
        .iter()
        .filter(|c| !c.nullable && c.default.is_none())
        .map(|c| c.name.as_str())
        .collect();
    let mut insert = json!({"type": "object", "properties": props});
    if !needed.is_empty() {
        insert["required"] = json!(needed);
    }
    out.insert(format!("{key}.insert"), insert);
    out.insert(format!("{key}.update"), json!({"type": "object", "properties": props}));
}

pub(super) fn components(api: &Api<'_>, names: &ComponentNames) -> Value {
    let mut schemas = Map::new();
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "description": "PostgREST's error: a PostgreSQL SQLSTATE or a PGRST code, and what went wrong",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": ["string", "null"]},
                "hint": {"type": ["string", "null"]},
            },
            "required": ["code", "message"],
        }),
    );
    for resource in &api.resources {
        relation_schemas(
            resource.relation,
            names.relation(&resource.relation.name.name),
            names,
            &mut schemas,
        );
    }
    for t in api.cache.named_types.iter().filter(|t| !t.attributes.is_empty()) {
        let Some(key) = names.composite(&t.type_name) else { continue };
        let props: Map<String, Value> =
            t.attributes.iter().map(|(n, ty)| (n.clone(), value_schema(ty, &[], true, names))).collect();
        schemas.insert(
            key.to_owned(),
            json!({"type": "object", "description": t.type_name, "properties": props}),
        );
    }
    for function in api.functions.iter().filter(|f| super::raw_body(f).is_none()) {
        let key = names.function(&function.name.name);
        let props: Map<String, Value> = function
            .args
            .iter()
            .map(|a| {
                let s = if a.variadic {
                    json!({"type": "array", "items": value_schema(element(&a.type_name), &[], false, names)})
                } else {
                    value_schema(&a.type_name, &[], false, names)
                };
                (a.name.clone(), s)
            })
            .collect();
        let mut args = json!({"type": "object", "properties": props});
        if let Some(c) = &function.comment {
            args["description"] = json!(c);
        }
        let required: Vec<&str> =
            function.args.iter().filter(|a| !a.has_default && !a.variadic).map(|a| a.name.as_str()).collect();
        if !required.is_empty() {
            args["required"] = json!(required);
        }
        schemas.insert(format!("{key}.args"), args);
    }
    let mut parameters = Map::new();
    let query = |name: &str, description: &str| json!({"name": name, "in": "query", "description": description, "required": false, "schema": {"type": "string"}});
    parameters.insert(
        "select".into(),
        query("select", "The columns and embedded resources to return: `select=id,name,author(name)`"),
    );
    parameters.insert("order".into(), query("order", "Ordering: `order=name.desc.nullslast,id`"));
    parameters.insert(
        "limit".into(),
        json!({"name": "limit", "in": "query", "description": "At most this many rows", "required": false, "schema": {"type": "integer", "minimum": 0}}),
    );
    parameters.insert(
        "offset".into(),
        json!({"name": "offset", "in": "query", "description": "Skip this many rows", "required": false, "schema": {"type": "integer", "minimum": 0}}),
    );
    parameters.insert(
        "range".into(),
        json!({"name": "Range", "in": "header", "description": "Rows by position: `0-24`", "required": false, "schema": {"type": "string", "pattern": "^\\d+-\\d*$"}}),
    );
    parameters.insert("columns".into(), query("columns", "The body's keys to insert: `columns=name,price`"));
    parameters.insert("on_conflict".into(), query("on_conflict", "The unique columns an upsert resolves on"));
    for resource in &api.resources {
        for c in crate::openapi::filterable(resource.relation) {
            let description = match &c.comment {
                Some(comment) => format!("{comment} (a filter: `eq.value`, `in.(a,b)`, `is.null`, ...)"),
                None => "A filter: `eq.value`, `gt.1`, `in.(a,b)`, `is.null`, `like.*x*`, ...".to_owned(),
            };
            parameters.insert(
                names.filter(&resource.relation.name.name, &c.name),
                json!({"name": c.name, "in": "query", "description": description, "required": false, "schema": {"type": "string"}}),
            );
        }
    }
    json!({
        "schemas": schemas,
        "parameters": parameters,
        "responses": {"Error": {"description": "An error", "content": {"application/json": {"schema": schema_ref("Error")}}}},
        "securitySchemes": {
            "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "A JWT whose role claim names the database role"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "apikey", "description": "An API key (`rowgate apikey create`), or a JWT sent as one"},
        },
    })
}

/// `components` without the parameters, schemas and responses nothing refers to (a relation's
/// insert schema when the caller may not insert, its filters when it may only insert).
pub(super) fn used(mut components: Value, paths: &Value) -> Value {
    let mut refs = std::collections::HashSet::new();
    collect_refs(paths, &mut refs);
    // What is kept refers to more (a response to the error object, a row to a composite
    // type): until nothing new is found.
    loop {
        let before = refs.len();
        for kind in ["responses", "parameters", "schemas"] {
            if let Some(Value::Object(m)) = components.get(kind) {
                for (name, v) in m {
                    if refs.contains(&format!("#/components/{kind}/{name}")) {
                        collect_refs(v, &mut refs);
                    }
                }
            }
        }
        if refs.len() == before {
            break;
        }
    }
    for kind in ["parameters", "schemas", "responses"] {
        if let Some(Value::Object(m)) = components.get_mut(kind) {
            m.retain(|name, _| refs.contains(&format!("#/components/{kind}/{name}")));
        }
    }
    components
}

fn collect_refs(value: &Value, out: &mut std::collections::HashSet<String>) {
    match value {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.insert(r.clone());
            }
            m.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::in_format;
    use serde_json::json;

    #[test]
    fn defaults_are_given_in_the_format_of_their_schema() {
        let dt = |d: &str| in_format(Some("date-time"), json!(d));
        assert_eq!(dt("2020-01-02 03:04:05+00"), Some(json!("2020-01-02T03:04:05+00:00")));
        assert_eq!(dt("2020-01-02 03:04:05.25-05:30"), Some(json!("2020-01-02T03:04:05.25-05:30")));
        assert_eq!(dt("now()"), None);
        assert_eq!(in_format(Some("date"), json!("1900-01-01")), Some(json!("1900-01-01")));
        assert_eq!(in_format(Some("date"), json!("CURRENT_DATE")), None);
        assert_eq!(in_format(Some("uuid"), json!("gen_random_uuid()")), None);
        assert_eq!(in_format(None, json!("draft")), Some(json!("draft")));
        assert_eq!(in_format(Some("int32"), json!(42)), Some(json!(42)));
    }
}
