//! PostgreSQL types as OpenAPI names them, by PostgREST's rules: a type name (PostgREST's
//! `data_type`: `integer`, `character varying`, `text[]`, `test.mood`) → a JSON type, a format
//! and an array's item type; and a column's default as a JSON value.

use serde_json::Value;

/// The JSON type of a PostgreSQL type: `None` for `json` and `jsonb`, which may hold anything.
pub fn json_type(pg: &str) -> Option<&'static str> {
    Some(match pg {
        "character varying" | "character" | "text" => "string",
        "boolean" => "boolean",
        "smallint" | "integer" | "bigint" => "integer",
        "numeric" | "real" | "double precision" => "number",
        "json" | "jsonb" => return None,
        t if t.ends_with("[]") => "array",
        _ => "string",
    })
}

/// PostgREST's `format`: `int32` and `int64` for the integers, else the type's own name.
pub fn format(pg: &str) -> &str {
    match pg {
        "smallint" | "integer" => "int32",
        "bigint" => "int64",
        t => t,
    }
}

/// An array type's element type (`text[]` → `text`).
pub fn element(pg: &str) -> &str {
    pg.strip_suffix("[]").unwrap_or(pg)
}

/// A column's default as a JSON value, as PostgREST reads it: for a type shown as a string,
/// the text without its cast to the column's type and its quotes; for any other, the
/// expression itself when it is JSON (`42`, `false`). Anything else (`nextval(...)`, a
/// quoted negative number) has no default in the description, nor has a value of another
/// type than the column's (SQLite's `0` and `1` are a boolean's `false` and `true`).
pub fn default_value(pg: &str, default: &str) -> Option<Value> {
    let ty = json_type(pg);
    let text = match ty {
        Some("string") => {
            let bare = match default.strip_suffix(&format!("::{pg}")) {
                Some(d) => d.trim_matches('\''),
                // SQLite keeps a literal as written.
                None => match default.strip_prefix('\'').and_then(|d| d.strip_suffix('\'')) {
                    Some(d) if !d.contains('\'') => d,
                    _ => default,
                },
            };
            format!("\"{bare}\"")
        }
        _ => default.to_owned(),
    };
    let value: Value = serde_json::from_str(&text).ok()?;
    match (ty, &value) {
        (Some("string"), Value::String(_))
        | (Some("boolean"), Value::Bool(_))
        | (Some("number"), Value::Number(_)) => Some(value),
        (Some("integer"), Value::Number(n)) if n.is_i64() || n.is_u64() => Some(value),
        (Some("boolean"), Value::Number(n)) => match n.as_i64() {
            Some(0) => Some(Value::Bool(false)),
            Some(1) => Some(Value::Bool(true)),
            _ => None,
        },
        // json and jsonb take anything; an array's default is PostgreSQL's text form.
        (None, _) => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_as_postgrest_reads_them() {
        assert_eq!(default_value("text", "'default'::text"), Some(json!("default")));
        assert_eq!(default_value("date", "'1900-01-01'::date"), Some(json!("1900-01-01")));
        assert_eq!(default_value("boolean", "false"), Some(json!(false)));
        assert_eq!(default_value("integer", "42"), Some(json!(42)));
        assert_eq!(default_value("numeric", "42.2"), Some(json!(42.2)));
        assert_eq!(default_value("integer", "nextval('t_id_seq'::regclass)"), None);
        assert_eq!(default_value("timestamp with time zone", "now()"), Some(json!("now()")));
        assert_eq!(default_value("json", "'{}'::json"), None);
        assert_eq!(default_value("boolean", "0"), Some(json!(false)));
        assert_eq!(default_value("text", "'draft'"), Some(json!("draft")));
        assert_eq!(default_value("integer", "'x'"), None);
    }

    #[test]
    fn types_and_formats() {
        assert_eq!((json_type("bigint"), format("bigint")), (Some("integer"), "int64"));
        assert_eq!((json_type("text[]"), element("text[]")), (Some("array"), "text"));
        assert_eq!(json_type("jsonb"), None);
        assert_eq!((json_type("test.mood"), format("test.mood")), (Some("string"), "test.mood"));
    }
}
