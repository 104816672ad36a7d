//! Grammar pieces shared by `select`, filters, `order` and logic trees: names, quoted
//! values and JSON paths, following PostgREST's `pFieldName`, `pQuotedValue` and `pJsonPath`.

use crate::cursor::{Cursor, PErr};
use crate::{Field, JsonKey, JsonStep};

/// What PostgREST says it expected where a field name was missing.
pub(crate) const EXPECT_FIELD: &str = "field name (* or [a..z0..9_$])";

/// `"..."` with `\x` escaping any character; the quotes are dropped.
pub(crate) fn quoted_value(c: &mut Cursor) -> Result<String, PErr> {
    if !c.eat('"') {
        return Err(c.err("\"\\\"\""));
    }
    let mut out = String::new();
    loop {
        match c.bump() {
            None => return Err(c.err("\"\\\"\"")),
            Some('"') => return Ok(out),
            Some('\\') => match c.bump() {
                Some(x) => out.push(x),
                None => return Err(c.err("any character")),
            },
            Some(x) => out.push(x),
        }
    }
}

/// PostgREST's identifier characters: letters (Unicode), ASCII digits, `_`, `$` and space.
fn is_ident_char(ch: char) -> bool {
    ch.is_alphabetic() || ch.is_ascii_digit() || matches!(ch, '_' | '$' | ' ')
}

/// A dash that separates name parts, as opposed to the start of a `->` arrow.
fn at_name_dash(c: &Cursor) -> bool {
    c.peek() == Some('-') && c.peek_at(1) != Some('>')
}

/// Parts joined by single dashes, each trimmed, like PostgREST's `sepByDash`.
fn sep_by_dash(c: &mut Cursor, part: impl Fn(char) -> bool, expecting: &str) -> Result<String, PErr> {
    let mut out = String::new();
    loop {
        let p = c.take_while(&part);
        if p.is_empty() {
            return Err(c.err(expecting));
        }
        out.push_str(p.trim());
        if at_name_dash(c) {
            c.bump();
            out.push('-');
        } else {
            return Ok(out);
        }
    }
}

/// A column, relation or alias name: quoted, or identifier parts joined by dashes.
pub(crate) fn field_name(c: &mut Cursor) -> Result<String, PErr> {
    if c.peek() == Some('"') {
        quoted_value(c)
    } else {
        sep_by_dash(c, is_ident_char, EXPECT_FIELD)
    }
}

/// A cast type name (`pIdentifier`): identifier characters, trimmed.
pub(crate) fn identifier(c: &mut Cursor) -> Result<String, PErr> {
    let s = c.take_while(is_ident_char);
    if s.is_empty() {
        Err(c.err("letter or digit"))
    } else {
        Ok(s.trim().to_string())
    }
}

/// Whether a JSON array index may end here (`pEnd` of `pJsonPath`).
fn at_index_end(c: &Cursor) -> bool {
    c.at_end() || c.starts_with("->") || c.starts_with("::") || matches!(c.peek(), Some('.' | ','))
}

/// `->key`, `->>key`, `->0`, `->-1` steps; an arrow must be followed by a key or index.
pub(crate) fn json_path(c: &mut Cursor) -> Result<Vec<JsonStep>, PErr> {
    let mut steps = Vec::new();
    loop {
        let as_text = if c.eat_str("->>") {
            true
        } else if c.eat_str("->") {
            false
        } else {
            return Ok(steps);
        };
        let start = c.pos;
        let (index_fail, had_digits) = match json_index(c) {
            Ok(idx) => {
                steps.push(JsonStep { as_text, key: JsonKey::Index(idx) });
                continue;
            }
            Err(failed) => failed,
        };
        c.pos = start;
        let key = if c.peek() == Some('"') {
            quoted_value(c)?
        } else {
            sep_by_dash(
                c,
                |ch| !matches!(ch, '(' | '-' | ':' | '.' | ',' | '>' | ')'),
                "digit or any non reserved character different from: .,>()",
            )
            .map_err(|e| {
                // A malformed negative index is blamed where the index went wrong.
                if e.pos == start && index_fail > start {
                    // Parsec, committed by the minus: only a digit may follow it; after digits,
                    // more of them or the path's end.
                    let expecting = match had_digits {
                        true => "digit, \"->\", \"::\", \".\", \",\" or end of input",
                        false => "digit",
                    };
                    c.err_at(index_fail, expecting)
                } else {
                    e
                }
            })?
        };
        steps.push(JsonStep { as_text, key: JsonKey::Key(key) });
    }
}

/// An optional minus, digits and a proper end; otherwise the position where it went wrong and
/// whether digits came before it.
fn json_index(c: &mut Cursor) -> Result<i64, (usize, bool)> {
    let neg = c.eat('-');
    let digits = c.take_while(|ch| ch.is_ascii_digit());
    if digits.is_empty() || !at_index_end(c) {
        return Err((c.pos, !digits.is_empty()));
    }
    // An index too large for i64 cannot address any real array element; it parses as a key.
    let n: i64 = digits.parse().map_err(|_| (c.pos, true))?;
    Ok(if neg { -n } else { n })
}

/// `pField`: optional spaces, a name, a JSON path, optional spaces.
pub(crate) fn field(c: &mut Cursor) -> Result<Field, PErr> {
    c.skip_ws();
    let name = field_name(c)?;
    let json_path = json_path(c)?;
    c.skip_ws();
    Ok(Field { name, json_path })
}

/// `pTreePath`: `a.b.col->x` as the embed path `[a, b]` and the field `col->x`.
pub(crate) fn tree_path(c: &mut Cursor) -> Result<(Vec<String>, Field), PErr> {
    let mut names = vec![field_name(c)?];
    while c.eat('.') {
        names.push(field_name(c)?);
    }
    let json_path = json_path(c)?;
    let name = names.pop().unwrap_or_default();
    Ok((names, Field { name, json_path }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> JsonKey {
        JsonKey::Key(s.to_string())
    }

    #[test]
    fn field_names() {
        let cases: &[(&str, Option<&str>)] = &[
            ("identifier", Some("identifier")),
            ("identifier with spaces", Some("identifier with spaces")),
            ("identifier-with-dashes", Some("identifier-with-dashes")),
            ("123", Some("123")),
            ("_", Some("_")),
            ("$", Some("$")),
            (":", None),
            ("\":\"", Some(":")),
            (" no leading or trailing spaces ", Some("no leading or trailing spaces")),
            ("\" leading \"", Some(" leading ")),
            ("\"a\\\"b\\\\c\"", Some("a\"b\\c")),
            ("\"unterminated", None),
            ("名前", Some("名前")),
            ("a-", None),
        ];
        for (input, want) in cases {
            let got = field_name(&mut Cursor::new(input)).ok();
            assert_eq!(got.as_deref(), *want, "input {input:?}");
        }
    }

    #[test]
    fn json_paths() {
        let cases: &[(&str, Option<Vec<JsonStep>>)] = &[
            ("->text", Some(vec![JsonStep { as_text: false, key: key("text") }])),
            ("->>!@#$%^&*_a", Some(vec![JsonStep { as_text: true, key: key("!@#$%^&*_a") }])),
            ("->1", Some(vec![JsonStep { as_text: false, key: JsonKey::Index(1) }])),
            ("->>-1", Some(vec![JsonStep { as_text: true, key: JsonKey::Index(-1) }])),
            ("->0,other", Some(vec![JsonStep { as_text: false, key: JsonKey::Index(0) }])),
            (
                "->a->>b",
                Some(vec![
                    JsonStep { as_text: false, key: key("a") },
                    JsonStep { as_text: true, key: key("b") },
                ]),
            ),
            ("->\"a.b\"", Some(vec![JsonStep { as_text: false, key: key("a.b") }])),
            ("->>--34", None),
            ("->>-xy-4", None),
            ("->", None),
        ];
        for (input, want) in cases {
            let got = json_path(&mut Cursor::new(input)).ok();
            assert_eq!(&got, want, "input {input:?}");
        }
    }

    #[test]
    fn tree_paths() {
        let (path, f) = tree_path(&mut Cursor::new("roles.actors.data->>a")).unwrap();
        assert_eq!(path, vec!["roles".to_string(), "actors".to_string()]);
        assert_eq!(f.name, "data");
        assert_eq!(f.json_path, vec![JsonStep { as_text: true, key: key("a") }]);
        assert!(tree_path(&mut Cursor::new("a.")).is_err());
        assert!(tree_path(&mut Cursor::new("@x")).is_err());
    }
}
