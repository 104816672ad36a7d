//! A record's values checked against its fields' options as PocketBase checks them — text
//! lengths and patterns, numbers' bounds and integers, addresses and their domains, a select's
//! values, a JSON value's size — each field's first failure in PocketBase's words. A blank
//! value (the type's zero) is `required`'s to refuse, not these checks'.

use serde_json::{json, Map, Value};

use super::error::PbError;

/// A text field's longest value when its `max` is 0.
const TEXT_MAX: u64 = 5000;

/// PocketBase's error for `value` in a field of `kind` with `options`, if it fails one.
pub fn check(kind: &str, options: &Map<String, Value>, value: &Value) -> Option<Value> {
    let number = |key: &str| options.get(key).and_then(Value::as_f64);
    let texts = |key: &str| -> Vec<&str> {
        options.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
    };
    match (kind, value) {
        ("text", Value::String(s)) => {
            let length = s.chars().count() as u64;
            let min = options.get("min").and_then(Value::as_u64).unwrap_or(0);
            let max = options.get("max").and_then(Value::as_u64).filter(|m| *m > 0).unwrap_or(TEXT_MAX);
            let pattern = options.get("pattern").and_then(Value::as_str).filter(|p| !p.is_empty());
            if length < min {
                return Some(with(
                    "validation_min_text_constraint",
                    format!("Must be at least {min} character(s)."),
                    json!({"min": min}),
                ));
            }
            if length > max {
                return Some(with(
                    "validation_max_text_constraint",
                    format!("Must be no more than {max} character(s)."),
                    json!({"max": max}),
                ));
            }
            // A pattern that does not compile was the superuser's to fix: nothing matches it.
            if pattern.is_some_and(|p| !regex::Regex::new(p).is_ok_and(|r| r.is_match(s))) {
                return Some(PbError::field("validation_invalid_format", "Invalid value format."));
            }
            None
        }
        ("number", Value::Number(n)) => {
            let n = n.as_f64()?;
            if options.get("onlyInt").and_then(Value::as_bool) == Some(true) && n.fract() != 0.0 {
                return Some(PbError::field(
                    "validation_only_int_constraint",
                    "Decimal numbers are not allowed.",
                ));
            }
            if let Some(min) = number("min").filter(|min| n < *min) {
                return Some(with(
                    "validation_min_number_constraint",
                    format!("Must be greater or equal than {}.", go(min)),
                    json!({"min": options["min"]}),
                ));
            }
            if let Some(max) = number("max").filter(|max| n > *max) {
                return Some(with(
                    "validation_max_number_constraint",
                    format!("Must be less or equal than {}.", go(max)),
                    json!({"max": options["max"]}),
                ));
            }
            None
        }
        ("email", Value::String(s)) => {
            let domain = match s.split_once('@') {
                Some((local, domain)) if is_email(local, domain) => domain,
                _ => return Some(PbError::field("validation_is_email", "Must be a valid email address.")),
            };
            let (only, except) = (texts("onlyDomains"), texts("exceptDomains"));
            if (!only.is_empty() && !only.contains(&domain)) || except.contains(&domain) {
                return Some(PbError::field(
                    "validation_email_domain_not_allowed",
                    "Email domain is not allowed.",
                ));
            }
            None
        }
        ("url", Value::String(s)) => {
            let host = match url::Url::parse(s) {
                Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => {
                    u.host_str().unwrap_or_default().to_owned()
                }
                _ => return Some(PbError::field("validation_invalid_url", "Must be a valid url.")),
            };
            let (only, except) = (texts("onlyDomains"), texts("exceptDomains"));
            if (!only.is_empty() && !only.contains(&host.as_str())) || except.contains(&host.as_str()) {
                return Some(PbError::field(
                    "validation_url_domain_not_allowed",
                    "Url domain is not allowed.",
                ));
            }
            None
        }
        ("select", value) => {
            let allowed = texts("values");
            let chosen: Vec<&str> = match value {
                Value::String(s) => vec![s.as_str()],
                Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if let Some(bad) = chosen.iter().find(|c| !allowed.contains(c)) {
                return Some(with(
                    "validation_invalid_value",
                    format!("Invalid value {bad}."),
                    json!({"value": bad}),
                ));
            }
            let max_select = options.get("maxSelect").and_then(Value::as_u64).unwrap_or(0);
            let mut distinct = chosen.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if max_select > 1 && distinct.len() as u64 > max_select {
                return Some(with(
                    "validation_too_many_values",
                    format!("Select no more than {max_select}."),
                    json!({"maxSelect": max_select}),
                ));
            }
            None
        }
        ("json", value) => {
            let max = options.get("maxSize").and_then(Value::as_u64).filter(|m| *m > 0)?;
            match value.to_string().len() as u64 > max {
                true => Some(with(
                    "validation_json_size_limit",
                    format!("The maximum allowed JSON size is {max} bytes."),
                    json!({"maxSize": max}),
                )),
                false => None,
            }
        }
        _ => None,
    }
}

/// `{"code", "message", "params"}`.
fn with(code: &str, message: String, params: Value) -> Value {
    json!({"code": code, "message": message, "params": params})
}

/// A number as Go's `%v` writes a float: `5`, `1.5`.
fn go(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// An address's parts as an address has them: something before the `@`, a domain with a dot
/// after it, no spaces.
fn is_email(local: &str, domain: &str) -> bool {
    let plain = |s: &str| !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c == '@');
    plain(local)
        && plain(domain)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn values_are_checked_as_pocketbase_checks_them() {
        let text = options(json!({"min": 2, "max": 4, "pattern": "^[a-z]+$"}));
        assert_eq!(
            check("text", &text, &json!("A")).map(|e| e["code"].clone()),
            Some(json!("validation_min_text_constraint"))
        );
        assert_eq!(
            check("text", &text, &json!("AB")).map(|e| e["code"].clone()),
            Some(json!("validation_invalid_format"))
        );
        assert_eq!(check("text", &text, &json!("ab")), None);
        let number = options(json!({"min": 1, "max": 5, "onlyInt": true}));
        assert_eq!(
            check("number", &number, &json!(9)),
            Some(
                json!({"code": "validation_max_number_constraint", "message": "Must be less or equal than 5.", "params": {"max": 5}})
            )
        );
        assert_eq!(
            check("number", &number, &json!(7.5)).map(|e| e["code"].clone()),
            Some(json!("validation_only_int_constraint"))
        );
        let email = options(json!({"onlyDomains": ["a.com"]}));
        assert_eq!(
            check("email", &email, &json!("bad")).map(|e| e["code"].clone()),
            Some(json!("validation_is_email"))
        );
        assert_eq!(
            check("email", &email, &json!("x@b.com")).map(|e| e["code"].clone()),
            Some(json!("validation_email_domain_not_allowed"))
        );
        let select = options(json!({"values": ["x", "y", "z"], "maxSelect": 2}));
        assert_eq!(
            check("select", &select, &json!(["x", "y", "z"])).map(|e| e["code"].clone()),
            Some(json!("validation_too_many_values"))
        );
        assert_eq!(check("select", &select, &json!(["x", "x"])), None);
        assert_eq!(
            check("url", &Map::new(), &json!("nope")).map(|e| e["code"].clone()),
            Some(json!("validation_invalid_url"))
        );
    }
}
