//! `select=` as PostgREST's `pFieldForest`: fields, casts, JSON paths, aggregates, embeds
//! and spreads. Like PostgREST, text after the last item is not checked (`a)b` is `a`).

use crate::cursor::{Cursor, PErr};
use crate::field::{field, field_name, identifier, EXPECT_FIELD};
use crate::{Aggregate, Embed, JoinType, RequestError, SelectItem, MAX_DEPTH};

/// Parses a `select=` value.
pub(crate) fn request_select(value: &str) -> Result<Vec<SelectItem>, RequestError> {
    forest(&mut Cursor::new(value), 0).map_err(|e| e.into_request_error("select parameter", value))
}

/// Comma-separated items; an item that fails without consuming input ends an empty list.
fn forest(c: &mut Cursor, depth: usize) -> Result<Vec<SelectItem>, PErr> {
    if depth > MAX_DEPTH {
        return Err(c.err("less deeply nested embeddings"));
    }
    let mut items = Vec::new();
    let start = c.pos;
    match item(c, depth) {
        Ok(i) => items.push(i),
        Err(e) if e.pos == start => {
            c.pos = start;
            return Ok(items);
        }
        Err(e) => return Err(e),
    }
    loop {
        let before = c.pos;
        c.skip_ws();
        if !c.eat(',') {
            if c.pos != before {
                // PostgREST's separator consumed spaces before failing, which is an error.
                return Err(c.err("\",\""));
            }
            return Ok(items);
        }
        c.skip_ws();
        items.push(item(c, depth)?);
    }
}

/// One item: a spread, an embed, or a field.
fn item(c: &mut Cursor, depth: usize) -> Result<SelectItem, PErr> {
    c.skip_ws();
    let start = c.pos;
    if let Some(mut embed) = spread_header(c).or_else(|| {
        c.pos = start;
        relation_header(c)
    }) {
        // The header only matched if `(` follows, so this cannot fail.
        c.eat('(');
        embed.select = forest(c, depth + 1)?;
        if !c.eat(')') {
            return Err(c.err("\",\" or \")\""));
        }
        return Ok(SelectItem::Embed(embed));
    }
    c.pos = start;
    // Spaces skipped before a failure put it past the item's start, so `forest` treats it
    // as consumed input, as Parsec does.
    field_select(c)
}

/// `!hint` / `!inner` / `!left`, up to two of them; the first hint and join win.
fn embed_params(c: &mut Cursor) -> Option<(Option<String>, Option<JoinType>)> {
    let mut hint = None;
    let mut join = None;
    for _ in 0..2 {
        if !c.eat('!') {
            break;
        }
        if c.eat_str("left") {
            join = join.or(Some(JoinType::Left));
        } else if c.eat_str("inner") {
            join = join.or(Some(JoinType::Inner));
        } else {
            let h = field_name(c).ok()?;
            hint = hint.or(Some(h));
        }
    }
    Some((hint, join))
}

/// `...name!hint!inner` followed by `(`, all or nothing.
fn spread_header(c: &mut Cursor) -> Option<Embed> {
    if !c.eat_str("...") {
        return None;
    }
    let name = field_name(c).ok()?;
    let (hint, join) = embed_params(c)?;
    (c.peek() == Some('(')).then_some(Embed {
        name,
        alias: None,
        hint,
        join,
        spread: true,
        select: Vec::new(),
    })
}

/// `alias:` (a single colon), all or nothing.
fn alias(c: &mut Cursor) -> Option<String> {
    let start = c.pos;
    if let Ok(a) = field_name(c) {
        if c.peek() == Some(':') && c.peek_at(1) != Some(':') {
            c.bump();
            return Some(a);
        }
    }
    c.pos = start;
    None
}

/// `alias:name!hint!inner` followed by `(`, all or nothing; `count` is never a relation.
fn relation_header(c: &mut Cursor) -> Option<Embed> {
    let alias = alias(c);
    let name = field_name(c).ok()?;
    if name == "count" {
        return None;
    }
    let (hint, join) = embed_params(c)?;
    (c.peek() == Some('(')).then_some(Embed { name, alias, hint, join, spread: false, select: Vec::new() })
}

/// Whether a field item may end here: before `)`, `,` or the end.
fn at_item_end(c: &Cursor) -> bool {
    matches!(c.peek(), None | Some(')' | ','))
}

/// `::type`, if present; `::` must be followed by a type name.
fn parse_cast(c: &mut Cursor) -> Result<Option<String>, PErr> {
    if c.eat_str("::") {
        identifier(c).map(Some)
    } else if c.peek() == Some(':') {
        Err(c.err_at(c.pos + 1, "\"::\""))
    } else {
        Ok(None)
    }
}

/// `.sum()` and friends, all or nothing.
fn aggregate(c: &mut Cursor) -> Option<Aggregate> {
    let start = c.pos;
    let agg = c.eat('.').then(|| {
        [
            ("sum", Aggregate::Sum),
            ("avg", Aggregate::Avg),
            ("count", Aggregate::Count),
            ("max", Aggregate::Max),
            ("min", Aggregate::Min),
        ]
        .into_iter()
        .find_map(|(w, a)| c.eat_str(w).then_some(a))
    });
    match agg {
        Some(Some(a)) if c.eat_str("()") => Some(a),
        _ => {
            c.pos = start;
            None
        }
    }
}

/// `*`, `alias:count()::cast`, or `alias:col->path::cast.agg()::cast`.
fn field_select(c: &mut Cursor) -> Result<SelectItem, PErr> {
    let start = c.pos;
    if c.eat('*') {
        if at_item_end(c) {
            return Ok(SelectItem::Star);
        }
        c.pos = start;
    }
    let alias = alias(c);
    let after_alias = c.pos;
    if c.eat_str("count()") {
        if let Ok(cast) = parse_cast(c) {
            if at_item_end(c) {
                c.skip_ws();
                return Ok(SelectItem::CountAll { alias, cast });
            }
        }
        c.pos = after_alias;
    }
    let field = match field(c) {
        Ok(f) => f,
        Err(e) if e.pos == after_alias && after_alias == start => {
            return Err(c.err_at(start, EXPECT_FIELD));
        }
        Err(e) => return Err(e),
    };
    let cast = parse_cast(c)?;
    let aggregate = aggregate(c);
    let aggregate_cast = parse_cast(c)?;
    if !at_item_end(c) {
        return Err(c.err("\"->>\", \"->\", \"::\", \".\", \")\", \",\" or end of input"));
    }
    c.skip_ws();
    Ok(SelectItem::Field { field, alias, cast, aggregate, aggregate_cast })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Field, JsonKey, JsonStep};

    fn fld(name: &str) -> SelectItem {
        SelectItem::Field {
            field: Field { name: name.into(), json_path: vec![] },
            alias: None,
            cast: None,
            aggregate: None,
            aggregate_cast: None,
        }
    }

    fn full(
        name: &str,
        json: Vec<JsonStep>,
        alias: Option<&str>,
        cast: Option<&str>,
        agg: Option<Aggregate>,
        agg_cast: Option<&str>,
    ) -> SelectItem {
        SelectItem::Field {
            field: Field { name: name.into(), json_path: json },
            alias: alias.map(String::from),
            cast: cast.map(String::from),
            aggregate: agg,
            aggregate_cast: agg_cast.map(String::from),
        }
    }

    fn embed(
        name: &str,
        alias: Option<&str>,
        hint: Option<&str>,
        join: Option<JoinType>,
        spread: bool,
        select: Vec<SelectItem>,
    ) -> SelectItem {
        SelectItem::Embed(Embed {
            name: name.into(),
            alias: alias.map(String::from),
            hint: hint.map(String::from),
            join,
            spread,
            select,
        })
    }

    fn step(as_text: bool, key: JsonKey) -> JsonStep {
        JsonStep { as_text, key }
    }

    #[test]
    fn items() {
        let k = |s: &str| JsonKey::Key(s.into());
        let cases: Vec<(&str, Vec<SelectItem>)> = vec![
            ("", vec![]),
            ("*", vec![SelectItem::Star]),
            ("id,name", vec![fld("id"), fld("name")]),
            (" id , name ", vec![fld("id"), fld("name")]),
            ("alias:name", vec![full("name", vec![], Some("alias"), None, None, None)]),
            ("name::text", vec![full("name", vec![], None, Some("text"), None, None)]),
            (
                "a:data->b->>c::int",
                vec![full(
                    "data",
                    vec![step(false, k("b")), step(true, k("c"))],
                    Some("a"),
                    Some("int"),
                    None,
                    None,
                )],
            ),
            (
                "arr->0,arr->-1",
                vec![
                    full("arr", vec![step(false, JsonKey::Index(0))], None, None, None, None),
                    full("arr", vec![step(false, JsonKey::Index(-1))], None, None, None, None),
                ],
            ),
            ("amount.sum()", vec![full("amount", vec![], None, None, Some(Aggregate::Sum), None)]),
            (
                "total:amount::numeric.avg()::int",
                vec![full(
                    "amount",
                    vec![],
                    Some("total"),
                    Some("numeric"),
                    Some(Aggregate::Avg),
                    Some("int"),
                )],
            ),
            (
                "x.max(),x.min(),x.count()",
                vec![
                    full("x", vec![], None, None, Some(Aggregate::Max), None),
                    full("x", vec![], None, None, Some(Aggregate::Min), None),
                    full("x", vec![], None, None, Some(Aggregate::Count), None),
                ],
            ),
            ("count()", vec![SelectItem::CountAll { alias: None, cast: None }]),
            (
                "c:count()::int",
                vec![SelectItem::CountAll { alias: Some("c".into()), cast: Some("int".into()) }],
            ),
            ("count", vec![fld("count")]),
            ("\"a.b\",\"c\\\"d\"", vec![fld("a.b"), fld("c\"d")]),
            ("client(id)", vec![embed("client", None, None, None, false, vec![fld("id")])]),
            ("client()", vec![embed("client", None, None, None, false, vec![])]),
            (
                "*,client(*,nested(*))",
                vec![
                    SelectItem::Star,
                    embed(
                        "client",
                        None,
                        None,
                        None,
                        false,
                        vec![
                            SelectItem::Star,
                            embed("nested", None, None, None, false, vec![SelectItem::Star]),
                        ],
                    ),
                ],
            ),
            (
                "a:rel!hint!inner(*)",
                vec![embed(
                    "rel",
                    Some("a"),
                    Some("hint"),
                    Some(JoinType::Inner),
                    false,
                    vec![SelectItem::Star],
                )],
            ),
            (
                "rel!left!fk(*)",
                vec![embed("rel", None, Some("fk"), Some(JoinType::Left), false, vec![SelectItem::Star])],
            ),
            (
                "*,...client(*),other(*)",
                vec![
                    SelectItem::Star,
                    embed("client", None, None, None, true, vec![SelectItem::Star]),
                    embed("other", None, None, None, false, vec![SelectItem::Star]),
                ],
            ),
            (
                "...rel!hint!inner(a)",
                vec![embed("rel", None, Some("hint"), Some(JoinType::Inner), true, vec![fld("a")])],
            ),
            ("名前", vec![fld("名前")]),
            // PostgREST never checks for the end of input.
            ("a)b", vec![fld("a")]),
        ];
        for (input, want) in cases {
            assert_eq!(request_select(input), Ok(want), "input {input:?}");
        }
    }

    #[test]
    fn errors() {
        let cases: &[(&str, usize)] = &[
            ("id,clients(name[])", 16),
            ("data->>-78xy", 11),
            ("name!hint", 5),
            ("name::", 7),
            ("a,", 3),
            ("rel(a", 6),
            ("rel->x(*)", 7),
            ("x.foo()", 2),
            ("rel(*) ", 8),
        ];
        for (input, col) in cases {
            let Err(RequestError::Parse { message, .. }) = request_select(input) else {
                panic!("{input} parsed")
            };
            assert_eq!(
                message,
                format!("\"failed to parse select parameter ({input})\" (line 1, column {col})"),
                "input {input:?}"
            );
        }
        // A minus commits a JSON index: only a digit may follow it; after digits, the path goes on.
        for (input, details) in [
            ("data->>--34", "unexpected \"-\" expecting digit"),
            ("data->>-78xy", "unexpected 'x' expecting digit, \"->\", \"::\", \".\", \",\" or end of input"),
        ] {
            let Err(RequestError::Parse { details: got, .. }) = request_select(input) else {
                panic!("{input} parsed")
            };
            assert_eq!(got, details, "input {input:?}");
        }
    }

    #[test]
    fn depth_is_capped() {
        let deep = format!("{}a{}", "r(".repeat(500), ")".repeat(500));
        assert!(request_select(&deep).is_err());
        let ok = format!("{}a{}", "r(".repeat(20), ")".repeat(20));
        assert!(request_select(&ok).is_ok());
    }
}
