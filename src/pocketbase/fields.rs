//! `fields=`: which keys of a record an answer keeps (`*` for all), a text shortened by
//! `:excerpt(max, withEllipsis)`.

use serde_json::{Map, Value};

use super::error::PbError;

/// The keys asked for; none asked for keeps every one.
pub struct Picked(Option<Vec<Pick>>);

struct Pick {
    key: String,
    excerpt: Option<(usize, bool)>,
}

impl Picked {
    /// Parses `fields=`.
    pub fn parse(text: Option<&str>) -> Result<Picked, PbError> {
        let Some(text) = text.filter(|t| !t.trim().is_empty()) else { return Ok(Picked(None)) };
        let mut picks = Vec::new();
        for item in split_top_level(text) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (key, modifier) = match item.split_once(':') {
                Some((key, modifier)) => (key, Some(modifier)),
                None => (item, None),
            };
            let excerpt = match modifier {
                None => None,
                Some(m) => Some(
                    excerpt_args(m).ok_or_else(|| PbError::bad_request(format!("invalid modifier {m}")))?,
                ),
            };
            picks.push(Pick { key: key.to_owned(), excerpt });
        }
        Ok(Picked(Some(picks)))
    }

    /// `record` with the keys asked for.
    pub fn apply(&self, mut record: Map<String, Value>) -> Map<String, Value> {
        let Some(picks) = &self.0 else { return record };
        let mut kept = Map::new();
        for pick in picks {
            let keys: Vec<String> = match pick.key.as_str() {
                "*" => record.keys().cloned().collect(),
                key => vec![key.to_owned()],
            };
            for key in keys {
                let Some(value) = record.remove(&key) else { continue };
                let value = match (pick.excerpt, value) {
                    (Some((max, ellipsis)), Value::String(s)) => Value::String(excerpt(&s, max, ellipsis)),
                    (_, v) => v,
                };
                kept.insert(key, value);
            }
        }
        kept
    }
}

/// Splits at the commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `excerpt(max)` or `excerpt(max, withEllipsis)`.
fn excerpt_args(modifier: &str) -> Option<(usize, bool)> {
    let args = modifier.strip_prefix("excerpt(")?.strip_suffix(')')?;
    let mut args = args.split(',').map(str::trim);
    let max = args.next()?.parse().ok()?;
    let ellipsis = match args.next() {
        None => false,
        Some(v) => matches!(v, "true" | "1" | "t"),
    };
    args.next().is_none().then_some((max, ellipsis))
}

/// The text without its HTML tags and runs of white space, cut at `max` characters.
fn excerpt(text: &str, max: usize, ellipsis: bool) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                plain.push(' ');
            }
            _ if in_tag => {}
            _ => plain.push(c),
        }
    }
    let plain = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    if plain.chars().count() <= max {
        return plain;
    }
    let mut cut: String = plain.chars().take(max).collect();
    if ellipsis {
        cut.push_str("...");
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_keys_asked_for_and_shortens_excerpts() {
        let record = json!({"id": "a", "title": "<p>Hello  world</p>", "views": 3});
        let Value::Object(record) = record else { unreachable!() };
        let picked = Picked::parse(Some("title:excerpt(5,true),views,nope")).unwrap();
        assert_eq!(Value::Object(picked.apply(record.clone())), json!({"title": "Hello...", "views": 3}));
        let all = Picked::parse(Some("*")).unwrap();
        assert_eq!(Value::Object(all.apply(record.clone())), Value::Object(record));
        assert!(Picked::parse(Some("title:shout")).is_err());
    }
}
