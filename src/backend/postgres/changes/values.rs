//! A decoded row's values, which `pgoutput` sends in their text form, as the typed JSON that
//! `to_jsonb` makes of them (what Supabase Realtime sends): numbers, booleans, JSON, arrays as
//! arrays, timestamps in ISO form; anything else as its text. The walsender writes dates in
//! ISO style and UTC (set when the replication connection starts). Pure.

use serde_json::{Number, Value};

/// What the conversion needs of a column's type (a domain's base type decides).
#[derive(Debug, Clone)]
pub struct TypeInfo {
    /// `pg_type.typname` of the column's own type (a domain's name), as Realtime reports it.
    pub name: String,
    /// The base type's name.
    pub base: String,
    /// For arrays, the element type's base name.
    pub element: Option<String>,
}

/// One value's JSON.
pub fn json(text: &str, ty: &TypeInfo) -> Value {
    match &ty.element {
        Some(element) => match parse_array(text) {
            Some(items) => array_json(items, element),
            None => Value::String(text.to_owned()),
        },
        None => scalar(text, &ty.base),
    }
}

fn scalar(text: &str, base: &str) -> Value {
    match base {
        "bool" => match text {
            "t" => Value::Bool(true),
            "f" => Value::Bool(false),
            other => Value::String(other.to_owned()),
        },
        "int2" | "int4" | "int8" | "oid" => match text.parse::<i64>() {
            Ok(i) => Value::from(i),
            Err(_) => number(text),
        },
        "float4" | "float8" | "numeric" => number(text),
        "json" | "jsonb" => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
        "timestamp" => Value::String(text.replacen(' ', "T", 1)),
        "timestamptz" => Value::String(iso_offset(&text.replacen(' ', "T", 1))),
        _ => Value::String(text.to_owned()),
    }
}

/// A number as JSON; `NaN` and the infinities stay text, as `to_jsonb` writes them.
fn number(text: &str) -> Value {
    if let Ok(i) = text.parse::<i64>() {
        return Value::from(i);
    }
    match text.parse::<f64>().ok().filter(|f| f.is_finite()).and_then(Number::from_f64) {
        Some(n) => Value::Number(n),
        None => Value::String(text.to_owned()),
    }
}

/// `+00` → `+00:00` at the end of a timestamp (PostgreSQL's text form omits zero minutes).
fn iso_offset(ts: &str) -> String {
    let bytes = ts.as_bytes();
    let n = bytes.len();
    if n >= 3
        && matches!(bytes[n - 3], b'+' | b'-')
        && bytes[n - 2].is_ascii_digit()
        && bytes[n - 1].is_ascii_digit()
    {
        return format!("{ts}:00");
    }
    ts.to_owned()
}

/// An array literal's items: text, NULL, or a nested array.
#[derive(Debug, PartialEq)]
enum Item {
    Text(String),
    Null,
    Array(Vec<Item>),
}

fn array_json(items: Vec<Item>, element: &str) -> Value {
    Value::Array(
        items
            .into_iter()
            .map(|i| match i {
                Item::Text(t) => scalar(&t, element),
                Item::Null => Value::Null,
                Item::Array(inner) => array_json(inner, element),
            })
            .collect(),
    )
}

/// Parses `{1,2,"a b",NULL,{3}}` (an optional `[1:2]=` dimension prefix is skipped).
fn parse_array(text: &str) -> Option<Vec<Item>> {
    let text = match text.find("={") {
        Some(i) if text.starts_with('[') => &text[i + 1..],
        _ => text,
    };
    let mut chars = text.chars().peekable();
    let items = parse_level(&mut chars)?;
    chars.next().is_none().then_some(items)
}

fn parse_level(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<Vec<Item>> {
    if chars.next()? != '{' {
        return None;
    }
    let mut items = Vec::new();
    if chars.peek() == Some(&'}') {
        chars.next();
        return Some(items);
    }
    loop {
        match chars.peek()? {
            '{' => items.push(Item::Array(parse_level(chars)?)),
            '"' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next()? {
                        '\\' => s.push(chars.next()?),
                        '"' => break,
                        c => s.push(c),
                    }
                }
                items.push(Item::Text(s));
            }
            _ => {
                let mut s = String::new();
                while let Some(&c) = chars.peek() {
                    if c == ',' || c == '}' {
                        break;
                    }
                    s.push(c);
                    chars.next();
                }
                let s = s.trim();
                items.push(if s.eq_ignore_ascii_case("NULL") {
                    Item::Null
                } else {
                    Item::Text(s.to_owned())
                });
            }
        }
        match chars.next()? {
            ',' => continue,
            '}' => return Some(items),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ty(base: &str) -> TypeInfo {
        TypeInfo { name: base.into(), base: base.into(), element: None }
    }

    fn array(element: &str) -> TypeInfo {
        TypeInfo { name: format!("_{element}"), base: format!("_{element}"), element: Some(element.into()) }
    }

    #[test]
    fn scalars_take_their_json_form() {
        assert_eq!(json("42", &ty("int4")), json!(42));
        assert_eq!(json("-9007199254740993", &ty("int8")), json!(-9007199254740993i64));
        assert_eq!(json("1.50", &ty("numeric")), json!(1.5));
        assert_eq!(json("NaN", &ty("float8")), json!("NaN"));
        assert_eq!(json("t", &ty("bool")), json!(true));
        assert_eq!(json(r#"{"a": [1, 2]}"#, &ty("jsonb")), json!({"a": [1, 2]}));
        assert_eq!(json("hello", &ty("text")), json!("hello"));
        assert_eq!(json("2025-09-10 12:34:56.781234", &ty("timestamp")), json!("2025-09-10T12:34:56.781234"));
        assert_eq!(json("2025-09-10 12:34:56+00", &ty("timestamptz")), json!("2025-09-10T12:34:56+00:00"));
        assert_eq!(json("2025-09-10 12:34:56+05:30", &ty("timestamptz")), json!("2025-09-10T12:34:56+05:30"));
        assert_eq!(json("2025-09-10", &ty("date")), json!("2025-09-10"));
    }

    #[test]
    fn arrays_become_arrays() {
        assert_eq!(json("{1,2,NULL}", &array("int4")), json!([1, 2, null]));
        assert_eq!(
            json(r#"{"a b","c,d",x,"q\"uote"}"#, &array("text")),
            json!(["a b", "c,d", "x", "q\"uote"])
        );
        assert_eq!(json("{{1,2},{3,4}}", &array("int4")), json!([[1, 2], [3, 4]]));
        assert_eq!(json("{}", &array("int4")), json!([]));
        assert_eq!(json("[0:1]={7,8}", &array("int4")), json!([7, 8]));
        assert_eq!(json("{t,f}", &array("bool")), json!([true, false]));
        assert_eq!(json("{broken", &array("int4")), json!("{broken"));
    }
}
