//! `fields=`: which keys of a record an answer keeps (`*` for all), a text shortened by
//! `:excerpt(max, withEllipsis)`; a dotted path keeps keys of an object within it
//! (`record.email`, `expand.author.name`, each of a list's objects alike).

use serde_json::{Map, Value};

use super::error::PbError;

/// The keys asked for; none asked for keeps every one.
pub struct Picked(Option<Vec<Pick>>);

struct Pick {
    /// The key, and the keys below it (`expand.author.name`).
    path: Vec<String>,
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
            picks.push(Pick { path: key.split('.').map(str::to_owned).collect(), excerpt });
        }
        Ok(Picked(Some(picks)))
    }

    /// `record` with the keys asked for.
    pub fn apply(&self, record: Map<String, Value>) -> Map<String, Value> {
        match &self.0 {
            None => record,
            Some(picks) => pick(record, &picks.iter().map(|p| (&p.path[..], p.excerpt)).collect::<Vec<_>>()),
        }
    }
}

/// A path of keys, and the excerpt its text is cut to.
type PathPick<'a> = (&'a [String], Option<(usize, bool)>);

/// The keys of `record` that `picks` (paths below it, and their excerpts) ask for: a key asked
/// for whole is kept whole, else only what its paths ask for of it.
fn pick(mut record: Map<String, Value>, picks: &[PathPick<'_>]) -> Map<String, Value> {
    let mut kept = Map::new();
    let mut below: Vec<(&str, Vec<PathPick<'_>>)> = Vec::new();
    for &(path, excerpted) in picks {
        let [key, rest @ ..] = path else { continue };
        if !rest.is_empty() {
            match below.iter_mut().find(|(k, _)| k == key) {
                Some((_, paths)) => paths.push((rest, excerpted)),
                None => below.push((key, vec![(rest, excerpted)])),
            }
            continue;
        }
        let keys: Vec<String> = match key.as_str() {
            "*" => record.keys().cloned().collect(),
            key => vec![key.to_owned()],
        };
        for key in keys {
            let Some(value) = record.remove(&key) else { continue };
            let value = match (excerpted, value) {
                (Some((max, ellipsis)), Value::String(s)) => Value::String(excerpt(&s, max, ellipsis)),
                (_, v) => v,
            };
            kept.insert(key, value);
        }
    }
    for (key, paths) in below {
        let Some(value) = record.remove(key) else { continue };
        let value = match value {
            Value::Object(o) => Value::Object(pick(o, &paths)),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|v| match v {
                        Value::Object(o) => Value::Object(pick(o, &paths)),
                        v => v,
                    })
                    .collect(),
            ),
            _ => continue,
        };
        kept.insert(key.to_owned(), value);
    }
    kept
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

    #[test]
    fn a_dotted_path_keeps_keys_within_objects_and_lists() {
        let answer = json!({"token": "abcdef", "record": {"id": "a", "email": "x@y", "expand": {"tags": [{"id": 1, "name": "n"}]}}});
        let Value::Object(answer) = answer else { unreachable!() };
        let picked =
            Picked::parse(Some("token:excerpt(2),record.email,record.expand.tags.name,nope.x")).unwrap();
        assert_eq!(
            Value::Object(picked.apply(answer.clone())),
            json!({"token": "ab", "record": {"email": "x@y", "expand": {"tags": [{"name": "n"}]}}})
        );
        let whole = Picked::parse(Some("record,record.email")).unwrap();
        assert_eq!(Value::Object(whole.apply(answer.clone())), json!({"record": answer["record"]}));
    }
}
