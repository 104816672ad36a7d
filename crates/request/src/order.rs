//! `order=a.desc.nullslast,b,rel(col).asc`, as PostgREST's `pOrder`.

use crate::cursor::{Cursor, PErr};
use crate::field::{field, field_name, tree_path};
use crate::{Direction, EmbedPath, NullsOrder, OrderTerm, RequestError};

/// `a.b.order=...`: the key gives the embed path, the value the terms.
pub(crate) fn request_order(key: &str, value: &str) -> Result<(EmbedPath, Vec<OrderTerm>), RequestError> {
    let (path, _) = tree_path(&mut Cursor::new(key)).map_err(|e| e.into_request_error("tree path", key))?;
    let terms = order(&mut Cursor::new(value)).map_err(|e| e.into_request_error("order", value))?;
    Ok((path, terms))
}

/// Comma-separated terms; like PostgREST, text after the last term's end is not checked.
fn order(c: &mut Cursor) -> Result<Vec<OrderTerm>, PErr> {
    let mut terms = Vec::new();
    loop {
        c.skip_ws();
        let start = c.pos;
        let term = match relation_term(c) {
            Some(t) => t,
            None => {
                c.pos = start;
                plain_term(c)?
            }
        };
        terms.push(term);
        c.skip_ws();
        if !c.eat(',') {
            return Ok(terms);
        }
    }
}

/// `.asc` / `.desc`, all or nothing.
fn direction(c: &mut Cursor) -> Option<Direction> {
    if c.eat_str(".asc") {
        Some(Direction::Asc)
    } else if c.eat_str(".desc") {
        Some(Direction::Desc)
    } else {
        None
    }
}

/// `.nullsfirst` / `.nullslast`, all or nothing.
fn nulls(c: &mut Cursor) -> Option<NullsOrder> {
    if c.eat_str(".nullsfirst") {
        Some(NullsOrder::First)
    } else if c.eat_str(".nullslast") {
        Some(NullsOrder::Last)
    } else {
        None
    }
}

/// Direction and nulls, then the end of the term (`,` or end of input).
fn modifiers(c: &mut Cursor) -> Result<(Option<Direction>, Option<NullsOrder>), PErr> {
    let dir = direction(c);
    let nls = nulls(c);
    if c.at_end() || c.peek() == Some(',') {
        return Ok((dir, nls));
    }
    // Parsec blames the character after the dot of an unknown modifier.
    if nls.is_none() && c.peek() == Some('.') {
        let expecting = if dir.is_some() {
            "\"nullsfirst\" or \"nullslast\""
        } else {
            "\"asc\", \"desc\", \"nullsfirst\" or \"nullslast\""
        };
        return Err(c.err_at(c.pos + 1, expecting));
    }
    let expecting =
        if nls.is_some() { "\",\" or end of input" } else { "delimiter (.), \",\" or end of input" };
    Err(c.err(expecting))
}

/// `col->path[.dir][.nulls]`.
fn plain_term(c: &mut Cursor) -> Result<OrderTerm, PErr> {
    let field = field(c)?;
    let (direction, nulls) = modifiers(c)?;
    Ok(OrderTerm { field, relation: None, direction, nulls })
}

/// `rel(col->path)[.dir][.nulls]`, all or nothing.
fn relation_term(c: &mut Cursor) -> Option<OrderTerm> {
    let relation = field_name(c).ok()?;
    if !c.eat('(') {
        return None;
    }
    let field = field(c).ok()?;
    if !c.eat(')') {
        return None;
    }
    let (direction, nulls) = modifiers(c).ok()?;
    Some(OrderTerm { field, relation: Some(relation), direction, nulls })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Field, JsonKey, JsonStep};

    fn term(
        rel: Option<&str>,
        name: &str,
        json: Vec<JsonStep>,
        d: Option<Direction>,
        n: Option<NullsOrder>,
    ) -> OrderTerm {
        OrderTerm {
            field: Field { name: name.into(), json_path: json },
            relation: rel.map(String::from),
            direction: d,
            nulls: n,
        }
    }

    #[test]
    fn terms() {
        use Direction::*;
        use NullsOrder::*;
        let key = |k: &str| vec![JsonStep { as_text: true, key: JsonKey::Key(k.into()) }];
        let cases: Vec<(&str, Vec<OrderTerm>)> = vec![
            ("name.desc.nullsfirst", vec![term(None, "name", vec![], Some(Desc), Some(First))]),
            (
                "a.desc.nullslast,b,c->>d.asc",
                vec![
                    term(None, "a", vec![], Some(Desc), Some(Last)),
                    term(None, "b", vec![], None, None),
                    term(None, "c", key("d"), Some(Asc), None),
                ],
            ),
            ("rel(col).desc", vec![term(Some("rel"), "col", vec![], Some(Desc), None)]),
            (
                "name,clients(name),id",
                vec![
                    term(None, "name", vec![], None, None),
                    term(Some("clients"), "name", vec![], None, None),
                    term(None, "id", vec![], None, None),
                ],
            ),
            ("a.nullslast", vec![term(None, "a", vec![], None, Some(Last))]),
            (" a , b ", vec![term(None, "a", vec![], None, None), term(None, "b", vec![], None, None)]),
        ];
        for (input, want) in cases {
            assert_eq!(order(&mut Cursor::new(input)), Ok(want), "input {input:?}");
        }
    }

    #[test]
    fn errors() {
        let cases: &[(&str, usize)] = &[
            ("clients(name,id)", 8),
            ("id.ac", 4),
            ("id.descc", 8),
            ("id.nulsfist", 4),
            ("id.nullslasttt", 13),
            ("id.asc.nlsfst", 8),
            ("id.asc.nullslasttt", 17),
            ("", 1),
        ];
        for (input, col) in cases {
            let err = request_order("order", input).unwrap_err();
            let RequestError::Parse { message, .. } = err else { panic!() };
            assert_eq!(
                message,
                format!("\"failed to parse order ({input})\" (line 1, column {col})"),
                "input {input:?}"
            );
        }
        // Where the end of input was an option, Parsec shows the character as Haskell shows a
        // Char.
        let RequestError::Parse { details, .. } = request_order("order", "id.asc.nullslasttt").unwrap_err()
        else {
            panic!()
        };
        assert_eq!(details, "unexpected 't' expecting \",\" or end of input");
    }
}
