//! A collection as PocketBase's collections API defines it: its name, type, fields with their
//! options, and its five rules, in PocketBase's JSON. A definition made through the API is
//! kept by the backend beside the real table it describes (`crate::backend::collections`);
//! here it is checked and filled in as PocketBase fills one in, and told what columns it
//! stands for — data the backend writes as its own SQL (its rules are `rules.rs`'s).

use serde_json::{json, Map, Value};

use super::error::PbError;
use crate::backend::collections::{ColumnKind, NewColumn, OnDelete};

/// The five rules, in PocketBase's order.
pub const RULES: [&str; 5] = ["listRule", "viewRule", "createRule", "updateRule", "deleteRule"];

/// The field types PocketBase has.
const TYPES: [&str; 13] = [
    "text", "number", "bool", "email", "url", "editor", "date", "autodate", "select", "file", "relation",
    "json", "geoPoint",
];

/// The fields a collection may have at most.
const MAX_FIELDS: usize = 1500;

/// Names a field may not have: they are the record's own keys.
const RESERVED: [&str; 3] = ["expand", "collectionId", "collectionName"];

/// A collection's definition: PocketBase's JSON object, its keys in PocketBase's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition(pub Map<String, Value>);

impl Definition {
    /// The definition stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Definition> {
        match serde_json::from_str(text).ok()? {
            Value::Object(map) => Some(Definition(map)),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.0.get("name").and_then(Value::as_str).unwrap_or_default()
    }

    /// Its id (`pbc_…`).
    pub fn id(&self) -> &str {
        self.0.get("id").and_then(Value::as_str).unwrap_or_default()
    }

    /// Its fields, each an object of options.
    pub fn fields(&self) -> impl Iterator<Item = &Map<String, Value>> {
        self.0.get("fields").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object)
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Map<String, Value>> {
        self.fields().find(|f| f.get("name").and_then(Value::as_str) == Some(name))
    }

    /// The rule `name` (one of [`RULES`]): `None` for superusers only, `""` for everyone.
    pub fn rule(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }

    /// The columns of its table, in field order.
    pub fn columns(&self, collection_table: &dyn Fn(&str) -> Option<String>) -> Vec<NewColumn> {
        self.fields().filter_map(|f| column(f, collection_table)).collect()
    }
}

/// The column a field is, as PocketBase makes it: every value `NOT NULL` with its type's zero,
/// but a `json` field (null until set) and a single relation (null for none, so that the
/// database's foreign key holds it to an existing record).
fn column(
    field: &Map<String, Value>,
    collection_table: &dyn Fn(&str) -> Option<String>,
) -> Option<NewColumn> {
    let name = field.get("name")?.as_str()?.to_owned();
    let kind = field.get("type")?.as_str()?;
    let many = field.get("maxSelect").and_then(Value::as_u64).unwrap_or(0) > 1;
    let required = field.get("required").and_then(Value::as_bool).unwrap_or(false);
    let (kind, references) = match kind {
        _ if name == "id" => (ColumnKind::Key, None),
        "number" => (ColumnKind::Number, None),
        "bool" => (ColumnKind::Bool, None),
        "json" => (ColumnKind::Json, None),
        "geoPoint" => (ColumnKind::Point, None),
        "select" | "file" | "relation" if many => (ColumnKind::List, None),
        "relation" => {
            let target = collection_table(field.get("collectionId")?.as_str()?)?;
            let cascade = field.get("cascadeDelete").and_then(Value::as_bool).unwrap_or(false);
            let on_delete = match (cascade, required) {
                (true, _) => OnDelete::Cascade,
                (false, true) => OnDelete::Restrict,
                (false, false) => OnDelete::SetNull,
            };
            (ColumnKind::Reference, Some((target, on_delete)))
        }
        _ => (ColumnKind::Text, None),
    };
    Some(NewColumn { name, kind, references })
}

/// PocketBase's id of a new collection of `kind` named `name`.
pub fn collection_id(kind: &str, name: &str) -> String {
    format!("pbc_{}", crc32fast::hash(format!("{kind}{name}").as_bytes()))
}

/// A definition made from a request's `body` as PocketBase makes one: options filled in with
/// their defaults, field ids given. `name_taken` says whether a collection or table of a name
/// is there already (case-insensitively, as PocketBase compares them); `collection_exists`
/// whether a relation's `collectionId` names one. `before` is the definition being changed.
pub fn checked(
    body: &Value,
    before: Option<&Definition>,
    name_taken: &dyn Fn(&str) -> bool,
    collection_exists: &dyn Fn(&str) -> bool,
    now: &str,
) -> Result<Definition, PbError> {
    let refused = match before {
        None => "Failed to create collection.",
        Some(_) => "Failed to update collection.",
    };
    let Value::Object(body) = body else { return Err(unreadable()) };
    let mut errors = Map::new();
    let given = |key: &str| body.get(key).or_else(|| before.and_then(|b| b.0.get(key)));

    let name = match given("name") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(_) => return Err(unreadable()),
    };
    let renamed = before.is_none_or(|b| !b.name().eq_ignore_ascii_case(&name));
    if name.is_empty() {
        errors.insert("name".into(), PbError::field("validation_required", "Cannot be blank."));
    } else if name.len() > 255 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        errors
            .insert("name".into(), PbError::field("validation_match_invalid", "Must be in a valid format."));
    } else if renamed && name_taken(&name) {
        errors.insert(
            "name".into(),
            PbError::field(
                "validation_collection_name_exists",
                "Collection name must be unique (case insensitive).",
            ),
        );
    }

    if before.is_none() {
        match body.get("id") {
            None | Some(Value::Null) => {}
            Some(Value::String(id)) if id.is_empty() => {}
            Some(Value::String(id))
                if id.len() > 100 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                errors.insert(
                    "id".into(),
                    PbError::field("validation_match_invalid", "Must be in a valid format."),
                );
            }
            Some(Value::String(id)) if collection_exists(id) => {
                errors.insert(
                    "id".into(),
                    PbError::field(
                        "validation_invalid_or_existing_id",
                        "The model id is invalid or already exists.",
                    ),
                );
            }
            Some(Value::String(_)) => {}
            Some(_) => return Err(unreadable()),
        }
    }
    let kind = match (given("type"), before) {
        (None | Some(Value::Null), None) => "base".to_owned(),
        (Some(Value::String(s)), _) => s.clone(),
        (_, Some(b)) => b.0.get("type").and_then(Value::as_str).unwrap_or("base").to_owned(),
        _ => return Err(unreadable()),
    };
    if before.is_some_and(|b| b.0.get("type").and_then(Value::as_str) != Some(&kind)) {
        errors.insert(
            "type".into(),
            PbError::field("validation_collection_type_change", "Collection type cannot be changed."),
        );
    } else if kind != "base" {
        let (code, message) = match kind.as_str() {
            "auth" | "view" => ("validation_in_invalid", "Only base collections can be made yet (rowgate)."),
            _ => ("validation_in_invalid", "Must be a valid value."),
        };
        errors.insert("type".into(), PbError::field(code, message));
    }

    let mut rules = Vec::with_capacity(RULES.len());
    for rule in RULES {
        match given(rule) {
            None | Some(Value::Null) => rules.push((rule, Value::Null)),
            Some(Value::String(s)) if s.trim().is_empty() => rules.push((rule, Value::String(String::new()))),
            Some(Value::String(s)) => {
                // Its names are checked against the fields when it is compiled.
                if let Err(e) = super::filter::parse(s) {
                    let message = format!("Invalid rule. Raw error: {}.", e.0);
                    errors.insert(rule.into(), PbError::field("validation_invalid_rule", &message));
                }
                rules.push((rule, Value::String(s.clone())));
            }
            Some(_) => return Err(unreadable()),
        }
    }

    let fields = match given("fields") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(fields)) => fields.clone(),
        Some(_) => return Err(unreadable()),
    };
    // PostgreSQL's tables hold at most 1,600 columns, SQLite's 2,000.
    if fields.len() > MAX_FIELDS {
        let message = format!("The length must be between 0 and {MAX_FIELDS}.");
        errors.insert("fields".into(), PbError::field("validation_length_out_of_range", &message));
        return Err(PbError::invalid(refused, errors));
    }
    let mut made = vec![id_field()];
    let mut field_errors = Map::new();
    let mut given_fields = Vec::with_capacity(fields.len());
    for field in &fields {
        let Value::Object(field) = field else { return Err(unreadable()) };
        let kind = match field.get("type") {
            Some(Value::String(t)) if TYPES.contains(&t.as_str()) => t.as_str(),
            _ => return Err(unreadable()),
        };
        let name = field.get("name").and_then(Value::as_str).unwrap_or_default().trim().to_owned();
        given_fields.push((field, kind, name));
    }
    // The id field is the first, as PocketBase counts them, whether given back or not.
    let is_id = |(_, kind, name): &(&Map<String, Value>, &str, String)| name == "id" && *kind == "text";
    let offset = usize::from(!given_fields.first().is_some_and(is_id));
    // A duplicated name is all PocketBase tells of the fields, the first one found.
    let mut seen = vec!["id".to_owned()];
    let duplicate =
        given_fields.iter().enumerate().filter(|(_, f)| !is_id(f)).find_map(|(i, (_, _, name))| {
            if seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
                return Some((i, name.clone()));
            }
            seen.push(name.clone());
            None
        });
    if let Some((i, name)) = &duplicate {
        let message = format!("Duplicated or invalid field name {name}.");
        field_errors.insert(
            (*i + offset).to_string(),
            json!({"name": {"code": "validation_duplicated_field_name", "message": message, "params": {"fieldName": name}}}),
        );
    }
    for (i, (field, kind, name)) in given_fields.iter().enumerate().filter(|_| duplicate.is_none()) {
        let (field, kind, name) = (*field, *kind, name.clone());
        if name == "id" && kind == "text" {
            continue; // the id field, given back as it was shown
        }
        let index = (i + offset).to_string();
        let mut error = |key: &str, e: Value| {
            field_errors.insert(index.clone(), json!({ key: e }));
        };
        if name.is_empty() {
            error("name", PbError::field("validation_required", "Cannot be blank."));
            continue;
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.len() > 255 {
            error("name", PbError::field("validation_match_invalid", "Must be in a valid format."));
            continue;
        }
        if RESERVED.contains(&name.as_str()) {
            error("name", PbError::field("validation_not_in_invalid", "Must not be in list."));
            continue;
        }
        let filled = filled(kind, &name, field);
        if kind == "select" && filled.get("values").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            error("values", PbError::field("validation_required", "Cannot be blank."));
        }
        if kind == "relation" {
            match filled.get("collectionId").and_then(Value::as_str) {
                Some(id) if collection_exists(id) => {}
                _ => error(
                    "collectionId",
                    PbError::field(
                        "validation_field_relation_missing_collection",
                        "The relation collection doesn't exist.",
                    ),
                ),
            }
        }
        made.push(Value::Object(filled));
    }
    if !field_errors.is_empty() {
        errors.insert("fields".into(), Value::Object(field_errors));
    }
    if !errors.is_empty() {
        return Err(PbError::invalid(refused, errors));
    }

    let id = match before {
        Some(b) => b.id().to_owned(),
        None => match body.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            Some(id) => id.to_owned(),
            None => collection_id(&kind, &name),
        },
    };
    let created = before.and_then(|b| b.0.get("created").cloned()).unwrap_or_else(|| json!(now));
    Ok(assembled(id, rules, name, kind, made, created, json!(now)))
}

/// The definition of a table made without the collections API, as PocketBase would show it:
/// each field named, typed and with the options given (PocketBase's defaults for the rest).
pub fn described(name: &str, fields: &[(String, &'static str, Map<String, Value>)], now: &str) -> Definition {
    let mut made = vec![id_field()];
    for (field, kind, given) in fields.iter().filter(|(f, _, _)| f != "id") {
        made.push(Value::Object(filled(kind, field, given)));
    }
    let rules = RULES.map(|rule| (rule, Value::Null));
    let id = collection_id("base", name);
    assembled(id, rules, name.to_owned(), "base".into(), made, json!(now), json!(now))
}

/// A definition's object, its keys in PocketBase's order.
fn assembled(
    id: String,
    rules: impl IntoIterator<Item = (&'static str, Value)>,
    name: String,
    kind: String,
    fields: Vec<Value>,
    created: Value,
    updated: Value,
) -> Definition {
    let mut d = Map::new();
    d.insert("id".into(), Value::String(id));
    for (rule, value) in rules {
        d.insert(rule.into(), value);
    }
    d.insert("name".into(), Value::String(name));
    d.insert("type".into(), Value::String(kind));
    d.insert("fields".into(), Value::Array(fields));
    d.insert("indexes".into(), json!([]));
    d.insert("created".into(), created);
    d.insert("updated".into(), updated);
    d.insert("system".into(), Value::Bool(false));
    Definition(d)
}

/// PocketBase's `id` field of a base collection.
fn id_field() -> Value {
    json!({
        "autogeneratePattern": "[a-z0-9]{15}", "help": "", "hidden": false, "id": "text3208210256",
        "max": 15, "min": 15, "name": "id", "pattern": "^[a-z0-9]+$", "presentable": false,
        "primaryKey": true, "required": true, "system": true, "type": "text"
    })
}

/// A field of `kind` named `name` with the options `given` has and PocketBase's defaults for
/// the rest, its keys in PocketBase's (alphabetical) order.
fn filled(kind: &str, name: &str, given: &Map<String, Value>) -> Map<String, Value> {
    let mut options: Vec<(&str, Value)> =
        vec![("hidden", json!(false)), ("presentable", json!(false)), ("system", json!(false))];
    if kind != "autodate" {
        options.extend([("help", json!("")), ("required", json!(false))]);
    }
    let own: &[(&str, Value)] = &match kind {
        "text" => vec![
            ("autogeneratePattern", json!("")),
            ("max", json!(0)),
            ("min", json!(0)),
            ("pattern", json!("")),
            ("primaryKey", json!(false)),
        ],
        "number" => vec![("max", Value::Null), ("min", Value::Null), ("onlyInt", json!(false))],
        "email" | "url" => vec![("exceptDomains", json!([])), ("onlyDomains", json!([]))],
        "editor" => vec![("convertURLs", json!(false)), ("maxSize", json!(0))],
        "date" => vec![("max", json!("")), ("min", json!(""))],
        "autodate" => vec![("onCreate", json!(false)), ("onUpdate", json!(false))],
        "select" => vec![("maxSelect", json!(0)), ("values", json!([]))],
        "file" => vec![
            ("maxSelect", json!(0)),
            ("maxSize", json!(0)),
            ("mimeTypes", json!([])),
            ("protected", json!(false)),
            ("thumbs", json!([])),
        ],
        "relation" => vec![
            ("cascadeDelete", json!(false)),
            ("collectionId", json!("")),
            ("maxSelect", json!(0)),
            ("minSelect", json!(0)),
        ],
        "json" => vec![("maxSize", json!(0))],
        _ => vec![],
    };
    options.extend(own.iter().cloned());
    let mut field: Vec<(String, Value)> = options
        .into_iter()
        .map(|(key, default)| {
            let value = match given.get(key) {
                Some(v) if same_kind(v, &default) => v.clone(),
                _ => default,
            };
            (key.to_owned(), value)
        })
        .collect();
    let id = match given.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(id) => id.to_owned(),
        None => format!("{kind}{}", crc32fast::hash(name.as_bytes())),
    };
    field.extend([("id".into(), json!(id)), ("name".into(), json!(name)), ("type".into(), json!(kind))]);
    field.sort_by(|a, b| a.0.cmp(&b.0));
    field.into_iter().collect()
}

/// Whether an option's given value is of the type its default is (a number's bounds are null
/// until set).
fn same_kind(given: &Value, default: &Value) -> bool {
    matches!(
        (given, default),
        (Value::Bool(_), Value::Bool(_))
            | (Value::Number(_), Value::Number(_) | Value::Null)
            | (Value::String(_), Value::String(_))
            | (Value::Array(_), Value::Array(_))
    )
}

/// PocketBase's 400 for a body its types do not take.
fn unreadable() -> PbError {
    PbError::invalid("Failed to load the submitted data due to invalid formatting.", Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_collection_is_filled_in_as_pocketbase_fills_it_in() {
        let body = json!({"name": "authors", "listRule": "", "fields": [{"name": "name", "type": "text", "required": true}]});
        let d = checked(&body, None, &|_| false, &|_| false, "2026-01-02 03:04:05.000Z").expect("valid");
        assert_eq!(d.id(), "pbc_526341563");
        let name = d.field("name").expect("field");
        assert_eq!(name.get("id"), Some(&json!("text1579384326")));
        let keys: Vec<&str> = name.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "autogeneratePattern",
                "help",
                "hidden",
                "id",
                "max",
                "min",
                "name",
                "pattern",
                "presentable",
                "primaryKey",
                "required",
                "system",
                "type"
            ]
        );
        assert_eq!(d.rule("listRule"), Some(""));
        assert_eq!(d.rule("viewRule"), None);
    }

    #[test]
    fn names_are_checked_as_pocketbase_checks_them() {
        let body = json!({"name": "bad name", "fields": [{"name": "q", "type": "text"}, {"name": "Q", "type": "number"}]});
        let e = checked(&body, None, &|_| false, &|_| false, "").expect_err("invalid");
        assert_eq!(e.data["name"]["code"], "validation_match_invalid");
        assert_eq!(e.data["fields"]["2"]["name"]["code"], "validation_duplicated_field_name");
        let e = checked(
            &json!({"name": "x", "fields": [{"name": "q", "type": "nope"}]}),
            None,
            &|_| false,
            &|_| false,
            "",
        )
        .expect_err("invalid");
        assert_eq!(e.message, "Failed to load the submitted data due to invalid formatting.");
    }
}
