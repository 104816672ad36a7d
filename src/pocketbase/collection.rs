//! A collection as PocketBase's API shows it, read from a table of the schema cache: every
//! table of the first exposed schema whose primary key is one column named `id` is one, its
//! columns its fields, each of the PocketBase type its SQL type stands for; a column with a
//! foreign key to another collection's `id` is a relation field.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::schema::{Relation, SchemaCache};

/// A collection: a table and its fields.
pub struct Collection {
    /// The table.
    pub relation: Arc<Relation>,
    /// `pbc_` and a checksum of its type and name, as PocketBase makes a new collection's id.
    pub id: String,
    /// Its fields, in table order.
    pub fields: Vec<Field>,
    /// For a collection made through the collections API, its rules (list, view, create,
    /// update, delete): an action without one is the superusers' alone. `None` for a table
    /// made in SQL, whose access is the backend's alone.
    pub rules: Option<[Option<String>; 5]>,
}

/// One field.
pub struct Field {
    /// The column's name.
    pub name: String,
    /// Its PocketBase type.
    pub kind: FieldKind,
    /// A value must be given on create (`NOT NULL` without a default).
    pub required: bool,
    /// A relation field: the collection its foreign key points at (by `id`).
    pub relation: Option<Link>,
    /// An autodate field: set on create, on update.
    pub autodate: Option<(bool, bool)>,
    /// For a collection made through the collections API: the field's PocketBase type and its
    /// options, which a value is checked against (`validate.rs`).
    pub defined: Option<(String, Map<String, Value>)>,
}

/// What a relation field points at.
pub struct Link {
    /// The collection.
    pub collection: String,
    /// The foreign key's name (the REST API's embedding hint).
    pub constraint: String,
}

/// The PocketBase field types a column can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// `text` (and anything not below).
    Text,
    /// `number`.
    Number,
    /// `bool`.
    Bool,
    /// `json`.
    Json,
    /// `date`: `2006-01-02 15:04:05.000Z`.
    Date,
}

impl Collection {
    /// The collection named `name` in `schema` (the first exposed schema), if there is one.
    pub fn find(cache: &SchemaCache, schema: &str, name: &str) -> Option<Collection> {
        let relation = cache.relation(schema, name)?;
        if relation.primary_key.len() != 1 || relation.primary_key[0] != "id" {
            return None;
        }
        let fields = relation
            .columns
            .iter()
            .map(|c| Field {
                name: c.name.clone(),
                kind: FieldKind::of(&c.data_type),
                // A table made in SQL: `created` and `updated` are set as PocketBase's are.
                defined: None,
                autodate: match (c.name.as_str(), FieldKind::of(&c.data_type)) {
                    (_, FieldKind::Number) => None,
                    ("created", _) => Some((true, false)),
                    ("updated", _) => Some((true, true)),
                    _ => None,
                },
                required: !c.nullable && c.default.is_none() && c.name != "id",
                relation: relation
                    .foreign_keys
                    .iter()
                    .find(|fk| {
                        fk.columns == [c.name.as_str()]
                            && fk.target_columns == ["id"]
                            && fk.target.schema == relation.name.schema
                    })
                    .map(|fk| Link { collection: fk.target.name.clone(), constraint: fk.name.clone() }),
            })
            .collect();
        let id = super::definition::collection_id("base", name);
        Some(Collection { relation: relation.clone(), id, fields, rules: None })
    }

    /// This collection as its definition (made through the collections API) says: its id,
    /// which fields are required, dates and autodates, and which rules it has.
    pub fn defined_by(mut self, d: &super::definition::Definition) -> Collection {
        self.id = d.id().to_owned();
        for field in &mut self.fields {
            let Some(def) = d.field(&field.name) else { continue };
            let flag = |key: &str| def.get(key).and_then(serde_json::Value::as_bool).unwrap_or(false);
            field.required = flag("required") && field.name != "id";
            field.autodate = None;
            let kind = def.get("type").and_then(serde_json::Value::as_str).unwrap_or_default();
            field.defined = Some((kind.to_owned(), def.clone()));
            match def.get("type").and_then(serde_json::Value::as_str) {
                Some("date") => field.kind = FieldKind::Date,
                Some("autodate") => {
                    field.kind = FieldKind::Date;
                    field.autodate = Some((flag("onCreate"), flag("onUpdate")));
                }
                _ => {}
            }
        }
        self.rules = Some(super::definition::RULES.map(|r| d.rule(r).map(str::to_owned)));
        self
    }

    /// The collection `d` defines, before its table is made (in `schema`): its fields as the
    /// definition types them, a relation pointing at the collection `target` names by id.
    pub fn from_definition(
        schema: &str,
        d: &super::definition::Definition,
        target: &dyn Fn(&str) -> Option<String>,
    ) -> Collection {
        use crate::schema::{QualifiedName, RelationKind};
        let name = QualifiedName { schema: schema.to_owned(), name: d.name().to_owned() };
        let relation = Arc::new(Relation::new(name, RelationKind::Table, Vec::new()));
        let fields = d
            .fields()
            .map(|f| {
                let text = |key: &str| f.get(key).and_then(serde_json::Value::as_str).unwrap_or_default();
                let many = f.get("maxSelect").and_then(serde_json::Value::as_u64).unwrap_or(0) > 1;
                let kind = match text("type") {
                    "number" => FieldKind::Number,
                    "bool" => FieldKind::Bool,
                    "json" | "geoPoint" => FieldKind::Json,
                    "select" | "file" | "relation" if many => FieldKind::Json,
                    "date" | "autodate" => FieldKind::Date,
                    _ => FieldKind::Text,
                };
                let relation = match (text("type"), many) {
                    ("relation", false) => target(text("collectionId"))
                        .map(|collection| Link { collection, constraint: String::new() }),
                    _ => None,
                };
                Field {
                    name: text("name").to_owned(),
                    kind,
                    required: false,
                    relation,
                    autodate: None,
                    defined: None,
                }
            })
            .collect();
        Collection { relation, id: d.id().to_owned(), fields, rules: None }.defined_by(d)
    }

    /// The collection whose name or id (`pbc_…`) is `name_or_id`, as PocketBase's routes take
    /// either.
    pub fn named(cache: &SchemaCache, schema: &str, name_or_id: &str) -> Option<Collection> {
        Collection::find(cache, schema, name_or_id).or_else(|| {
            let checksum: u32 = name_or_id.strip_prefix("pbc_")?.parse().ok()?;
            let name = cache.relations.keys().find(|n| {
                n.schema == schema && crc32fast::hash(format!("base{}", n.name).as_bytes()) == checksum
            })?;
            Collection::find(cache, schema, &name.name)
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.relation.name.name
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// A row as PocketBase shows a record: `collectionId`, `collectionName`, then each field,
    /// a missing value as its type's zero (PocketBase's columns are `NOT NULL` with one).
    pub fn record(&self, mut row: Map<String, Value>) -> Map<String, Value> {
        let mut record = Map::with_capacity(self.fields.len() + 2);
        record.insert("collectionId".into(), Value::String(self.id.clone()));
        record.insert("collectionName".into(), Value::String(self.name().to_owned()));
        for field in &self.fields {
            let value = row.remove(&field.name).unwrap_or(Value::Null);
            record.insert(field.name.clone(), field.kind.shown(value));
        }
        record
    }
}

impl FieldKind {
    /// The type a column of SQL type `data_type` (as the OpenAPI description names it) is.
    fn of(data_type: &str) -> FieldKind {
        match data_type {
            "boolean" => FieldKind::Bool,
            "smallint" | "integer" | "bigint" | "numeric" | "real" | "double precision" => FieldKind::Number,
            "json" | "jsonb" => FieldKind::Json,
            "date" | "timestamp without time zone" | "timestamp with time zone" => FieldKind::Date,
            _ => FieldKind::Text,
        }
    }

    /// A stored value as PocketBase writes it.
    fn shown(self, value: Value) -> Value {
        match (self, value) {
            (FieldKind::Json, v) => v,
            (FieldKind::Text, Value::Null) | (FieldKind::Date, Value::Null) => Value::String(String::new()),
            (FieldKind::Number, Value::Null) => Value::from(0),
            (FieldKind::Bool, Value::Null) => Value::Bool(false),
            (FieldKind::Number, Value::Number(n)) => number(n),
            (FieldKind::Date, Value::String(s)) => Value::String(date(&s)),
            (_, v) => v,
        }
    }
}

/// A number as Go's `float64` marshals: `3`, not `3.0`.
fn number(n: serde_json::Number) -> Value {
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 && !n.is_i64() && !n.is_u64() => {
            Value::from(f as i64)
        }
        _ => Value::Number(n),
    }
}

/// A date or timestamp as PocketBase writes one (`2006-01-02 15:04:05.000Z`, UTC); a text
/// that is not one stays as it is.
pub fn date(text: &str) -> String {
    use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
    let utc = DateTime::parse_from_rfc3339(text)
        .map(|d| d.with_timezone(&Utc).naive_utc())
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.fZ"))
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f"))
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%#z").map(|d| d.naive_utc()))
        .or_else(|_| NaiveDate::parse_from_str(text, "%Y-%m-%d").map(|d| d.and_time(Default::default())));
    match utc {
        Ok(t) => format_date(t),
        Err(_) => text.to_owned(),
    }
}

/// `2006-01-02 15:04:05.000Z`.
pub fn format_date(t: chrono::NaiveDateTime) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_written_as_pocketbase_writes_them() {
        assert_eq!(date("2024-05-06T07:08:09.5+02:00"), "2024-05-06 05:08:09.500Z");
        assert_eq!(date("2024-05-06 07:08:09.123Z"), "2024-05-06 07:08:09.123Z");
        assert_eq!(date("2024-05-06T07:08:09"), "2024-05-06 07:08:09.000Z");
        assert_eq!(date("2024-05-06"), "2024-05-06 00:00:00.000Z");
        assert_eq!(date("soon"), "soon");
    }

    #[test]
    fn whole_floats_are_written_as_integers() {
        assert_eq!(FieldKind::Number.shown(serde_json::json!(3.0)), serde_json::json!(3));
        assert_eq!(FieldKind::Number.shown(serde_json::json!(10.5)), serde_json::json!(10.5));
        assert_eq!(FieldKind::Number.shown(Value::Null), serde_json::json!(0));
        assert_eq!(FieldKind::Text.shown(Value::Null), serde_json::json!(""));
    }
}
