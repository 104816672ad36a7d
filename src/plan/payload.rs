//! The body of a write, turned into what the SQL stage sends: one JSON array of objects, which
//! PostgreSQL unpacks itself (`json_to_recordset`), and the keys those objects set.
//!
//! JSON bodies are checked and scanned for keys but never re-encoded, so numbers reach
//! PostgreSQL with every digit they were sent with. CSV and form bodies become JSON strings
//! (and `NULL` in CSV a JSON null), which PostgreSQL then reads by each column's type.

use std::collections::HashSet;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{code, Error};

/// Distinct keys a write's body may have, across all its objects: more columns than any table
/// has (PostgreSQL allows 1,600). A function's body has no such bound (a single json argument
/// takes any object); its keys are scanned in linear time all the same.
pub const MAX_KEYS: usize = 2_000;

/// A write's rows, as one JSON array of objects.
#[derive(Debug, Clone)]
pub struct Payload {
    /// The objects, as a JSON array.
    pub json: String,
    /// The first object's keys, in its order.
    pub keys: Vec<String>,
    /// How many objects there are.
    pub rows: usize,
    /// Every key of every object, in the order first seen (the first object's keys first).
    pub all_keys: Vec<String>,
    /// The values are the body's text (CSV, form), each to be read by its column's type as
    /// PostgreSQL reads text input, rather than JSON values.
    pub textual: bool,
}

/// Reads a body of `content_type` (JSON when absent) with at most `max_keys` distinct keys.
/// Unless the request names its columns (`columns=`), every object of an array must have the
/// same keys, as in PostgREST.
pub fn parse(
    content_type: Option<&str>,
    body: &[u8],
    columns_given: bool,
    max_keys: usize,
) -> Result<Payload, Error> {
    match content_type.unwrap_or("application/json") {
        "application/json" | "application/vnd.pgrst.object+json" | "application/vnd.pgrst.array+json" => {
            json(body, columns_given, max_keys)
        }
        "text/csv" => csv(body),
        "application/x-www-form-urlencoded" => Ok(form(body)),
        other => Err(invalid_body(format!("Content-Type not acceptable: {other}"))),
    }
}

/// The first element of a payload alone (PATCH applies one object to every row).
pub fn first_only(p: Payload) -> Result<Payload, Error> {
    if p.rows <= 1 {
        return Ok(p);
    }
    let items: Vec<&RawValue> = serde_json::from_str(&p.json).map_err(|_| invalid_json())?;
    Ok(Payload {
        json: format!("[{}]", items[0].get()),
        all_keys: p.keys.clone(),
        keys: p.keys,
        rows: 1,
        textual: p.textual,
    })
}

fn json(body: &[u8], columns_given: bool, max_keys: usize) -> Result<Payload, Error> {
    check_depth(body)?;
    let text = std::str::from_utf8(body).map_err(|_| invalid_json())?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        let keys = object_keys(text, max_keys)?;
        return Ok(Payload {
            json: format!("[{text}]"),
            all_keys: keys.clone(),
            keys,
            rows: 1,
            textual: false,
        });
    }
    if !trimmed.starts_with('[') {
        return Err(invalid_json());
    }
    let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| invalid_json())?;
    let mut keys = Vec::new();
    let mut first: HashSet<String> = HashSet::new();
    let mut all_keys: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let these = object_keys(item.get(), max_keys)?;
        if i == 0 {
            first = these.iter().cloned().collect();
            keys = these.clone();
        } else if !columns_given && !same_keys(&first, &these) {
            return Err(mismatch());
        }
        for k in these {
            if seen.insert(k.clone()) {
                if seen.len() > max_keys {
                    return Err(too_many_keys(max_keys));
                }
                all_keys.push(k);
            }
        }
    }
    Ok(Payload { json: text.to_owned(), rows: items.len(), keys, all_keys, textual: false })
}

/// PGRST102 for objects of one body with different keys.
pub fn mismatch() -> Error {
    invalid_body("All object keys must match".into())
}

/// Whether every object of a JSON array has the same keys, `ignore`d ones aside.
pub fn keys_match(json: &str, ignore: &[String]) -> Result<bool, Error> {
    let items: Vec<&RawValue> = serde_json::from_str(json).map_err(|_| invalid_json())?;
    let ignore: HashSet<&String> = ignore.iter().collect();
    let mut first: Option<HashSet<String>> = None;
    for item in items {
        let mut these = object_keys(item.get(), usize::MAX)?;
        these.retain(|k| !ignore.contains(k));
        match &first {
            None => first = Some(these.into_iter().collect()),
            Some(f) if !same_keys(f, &these) => return Ok(false),
            Some(_) => {}
        }
    }
    Ok(true)
}

/// Whether `b` (distinct keys) has exactly the keys of `a`.
fn same_keys(a: &HashSet<String>, b: &[String]) -> bool {
    a.len() == b.len() && b.iter().all(|k| a.contains(k))
}

/// The keys of one JSON object, in order and once each, without decoding its values; at most
/// `max` of them.
fn object_keys(text: &str, max: usize) -> Result<Vec<String>, Error> {
    /// The scan: its bound, and whether it stopped there.
    struct Keys<'a>(usize, &'a std::cell::Cell<bool>);
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
            let mut keys: Vec<String> = Vec::new();
            let mut seen: HashSet<String> = HashSet::new();
            while let Some(k) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                if seen.insert(k.clone()) {
                    if keys.len() == self.0 {
                        self.1.set(true);
                        return Err(serde::de::Error::custom("too many keys"));
                    }
                    keys.push(k);
                }
            }
            Ok(keys)
        }
    }
    let too_many = std::cell::Cell::new(false);
    let mut de = serde_json::Deserializer::from_str(text);
    let keys = (&mut de).deserialize_map(Keys(max, &too_many)).map_err(|_: serde_json::Error| {
        if too_many.get() {
            too_many_keys(max)
        } else {
            invalid_json()
        }
    })?;
    de.end().map_err(|_| invalid_json())?;
    Ok(keys)
}

/// CSV with a header row; an unquoted or quoted `NULL` is SQL null, an empty field is `""`.
fn csv(body: &[u8]) -> Result<Payload, Error> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(body);
    let keys: Vec<String> = reader
        .headers()
        .map_err(|e| invalid_body(format!("Invalid CSV: {e}")))?
        .iter()
        .map(str::to_owned)
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| match e.kind() {
            // PostgREST's words for a ragged row.
            csv::ErrorKind::UnequalLengths { .. } => {
                invalid_body("All lines must have same number of fields".into())
            }
            _ => invalid_body(format!("Invalid CSV: {e}")),
        })?;
        let object: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .zip(record.iter())
            .map(|(k, v)| {
                let v = if v == "NULL" { serde_json::Value::Null } else { v.into() };
                (k.clone(), v)
            })
            .collect();
        rows.push(serde_json::Value::Object(object));
    }
    Ok(Payload {
        rows: rows.len(),
        json: serde_json::Value::Array(rows).to_string(),
        all_keys: keys.clone(),
        keys,
        textual: true,
    })
}

/// `a=1&b=x+y`: one object of strings.
fn form(body: &[u8]) -> Payload {
    let mut object = serde_json::Map::new();
    for (k, v) in form_urlencoded::parse(body) {
        object.insert(k.into_owned(), v.into_owned().into());
    }
    let keys: Vec<String> = object.keys().cloned().collect();
    Payload {
        json: serde_json::Value::Array(vec![object.into()]).to_string(),
        all_keys: keys.clone(),
        keys,
        rows: 1,
        textual: true,
    }
}

/// RG004 for a body with more than `max` distinct keys.
fn too_many_keys(max: usize) -> Error {
    Error::api(code::TOO_COMPLEX, format!("The body has more than {max} distinct keys"))
}

/// How deep a JSON value may nest (arrays and objects): deeper than any document needs, far
/// shallower than what exhausts PostgreSQL's stack (its 54001, a 500).
pub const MAX_DEPTH: usize = 512;

/// RG004 when the JSON text `text` nests deeper than [`MAX_DEPTH`]; counted in one pass,
/// outside strings, before anything parses it.
pub fn check_depth(text: &[u8]) -> Result<(), Error> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b'[' | b'{') => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Error::api(
                        code::TOO_COMPLEX,
                        format!("The JSON value nests deeper than {MAX_DEPTH} levels"),
                    ));
                }
            }
            (false, b']' | b'}') => depth = depth.saturating_sub(1),
            (false, _) => {}
        }
    }
    Ok(())
}

fn invalid_json() -> Error {
    invalid_body("Empty or invalid json".into())
}

fn invalid_body(message: String) -> Error {
    Error::Request(rowgate_request::RequestError::InvalidBody(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_json(body: &[u8], columns_given: bool) -> Result<Payload, Error> {
        parse(None, body, columns_given, MAX_KEYS)
    }

    fn parse_as(content_type: Option<&str>, body: &[u8], columns_given: bool) -> Result<Payload, Error> {
        parse(content_type, body, columns_given, MAX_KEYS)
    }

    #[test]
    fn objects_and_arrays() {
        let p = parse_json(br#"{"a": 1.000000000000000000001, "b": "x"}"#, false).unwrap();
        assert_eq!(p.json, r#"[{"a": 1.000000000000000000001, "b": "x"}]"#);
        assert_eq!((p.keys, p.rows), (vec!["a".to_string(), "b".to_string()], 1));
        let p = parse_json(br#"[{"a":1,"b":2},{"b":3,"a":4}]"#, false).unwrap();
        assert_eq!(p.rows, 2);
        assert!(parse_json(br#"[{"a":1},{"b":3}]"#, false).is_err());
        assert!(parse_json(br#"[{"a":1},{"b":3}]"#, true).is_ok());
        for bad in [&b""[..], b"{", b"5", b"[1]", b"{} x", b"\xff"] {
            assert!(parse_json(bad, false).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn csv_and_form() {
        let p = parse_as(Some("text/csv"), b"id,name,tags\n1,,NULL\n2,\"a,b\",\"{x}\"", false).unwrap();
        assert_eq!(p.json, r#"[{"id":"1","name":"","tags":null},{"id":"2","name":"a,b","tags":"{x}"}]"#);
        let p = parse_as(Some("application/x-www-form-urlencoded"), b"a=1&b=x+y%21", false).unwrap();
        assert_eq!(p.json, r#"[{"a":"1","b":"x y!"}]"#);
        assert!(parse_as(Some("application/xml"), b"<a/>", false).is_err());
    }
}
