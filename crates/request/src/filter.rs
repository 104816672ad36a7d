//! Filter operator expressions `[not.]op[(mod)].value`, as PostgREST's `pOpExpr`.
//!
//! Like PostgREST, nothing is required after a complete operand (`is.nullx` is `is.null`),
//! because its parser never asks for the end of input.

use crate::cursor::{Cursor, PErr};
use crate::field::{field, quoted_value, tree_path};
use crate::{CompareOp, EmbedPath, Filter, FtsOp, IsValue, Operation, Quantifier};

/// What PostgREST says it expected where no operator parsed.
const EXPECT_OP: &str = "\"not\" or operator (eq, gt, ...)";

/// How far an operand extends: a whole query-string value, or up to `,`/`)` in a logic tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// `pSingleVal`: everything that is left.
    Rest,
    /// `pLogicSingleVal`: a quoted value, a `{...}` array, or text up to `,` or `)`.
    Logic,
}

/// A failed operator expression; `consumed` tells whether PostgREST could still fall back
/// to treating the value as an RPC argument (only when nothing was consumed).
#[derive(Debug)]
pub(crate) struct OpFail {
    /// Parsec would have consumed input before failing.
    pub consumed: bool,
    /// Where and why.
    pub err: PErr,
}

/// Parses `[not.]op.value` into (negated, operation).
pub(crate) fn op_expr(c: &mut Cursor, kind: ValueKind) -> Result<(bool, Operation), OpFail> {
    let negated = c.eat_str("not.");
    let hard = |err| OpFail { consumed: true, err };
    if c.eat_str("in.") {
        return list_val(c).map(|v| (negated, Operation::In(v))).map_err(hard);
    }
    if c.eat_str("is.") {
        return is_val(c).map(|v| (negated, Operation::Is(v))).map_err(hard);
    }
    if c.eat_str("isdistinct.") {
        return single_val(c, kind).map(|v| (negated, Operation::IsDistinct(v))).map_err(hard);
    }
    let start = c.pos;
    for attempt in [fts, simple_op, quant_op] {
        match attempt(c, kind) {
            Some(op) => return Ok((negated, op)),
            None => c.pos = start,
        }
    }
    Err(OpFail { consumed: negated, err: c.err(if negated { "operator (eq, gt, ...)" } else { EXPECT_OP }) })
}

/// An operand of the given kind.
fn single_val(c: &mut Cursor, kind: ValueKind) -> Result<String, PErr> {
    match kind {
        ValueKind::Rest => Ok(c.take_rest()),
        ValueKind::Logic => Ok(logic_single_val(c)),
    }
}

/// `pLogicSingleVal`: never fails, it may just be empty.
fn logic_single_val(c: &mut Cursor) -> String {
    let start = c.pos;
    if let Ok(v) = quoted_value(c) {
        if matches!(c.peek(), None | Some(',' | ')')) {
            return v;
        }
    }
    c.pos = start;
    if c.eat('{') {
        let inner = c.take_while(|ch| ch != '{' && ch != '}');
        if c.eat('}') {
            return format!("{{{inner}}}");
        }
    }
    c.pos = start;
    c.take_while(|ch| ch != ',' && ch != ')')
}

/// `(a,"b,c",d)`: items unquoted and unescaped; `()` is the empty list.
fn list_val(c: &mut Cursor) -> Result<Vec<String>, PErr> {
    c.skip_ws();
    if !c.eat('(') {
        return Err(c.err("\"(\""));
    }
    c.skip_ws();
    let mut items = Vec::new();
    let mut only_empty_unquoted = true;
    loop {
        let start = c.pos;
        let quoted = match quoted_value(c) {
            Ok(v) if matches!(c.peek(), None | Some(',' | ')')) => Some(v),
            _ => None,
        };
        match quoted {
            Some(v) => {
                only_empty_unquoted = false;
                items.push(v);
            }
            None => {
                c.pos = start;
                let v = c.take_while(|ch| ch != ',' && ch != ')');
                if !v.is_empty() {
                    only_empty_unquoted = false;
                }
                items.push(v);
            }
        }
        if !c.eat(',') {
            break;
        }
        only_empty_unquoted = false;
    }
    c.skip_ws();
    if !c.eat(')') {
        return Err(c.err("\",\" or \")\""));
    }
    c.skip_ws();
    if only_empty_unquoted {
        items.clear();
    }
    Ok(items)
}

/// `null`, `not_null`, `true`, `false`, `unknown`, in any ASCII case.
fn is_val(c: &mut Cursor) -> Result<IsValue, PErr> {
    const VALUES: [(&str, IsValue); 5] = [
        ("null", IsValue::Null),
        ("not_null", IsValue::NotNull),
        ("true", IsValue::True),
        ("false", IsValue::False),
        ("unknown", IsValue::Unknown),
    ];
    for (word, value) in VALUES {
        let n = word.chars().count();
        let matches =
            word.chars().enumerate().all(|(i, w)| c.peek_at(i).is_some_and(|x| x.to_ascii_lowercase() == w));
        if matches {
            c.pos += n;
            return Ok(value);
        }
    }
    Err(c.err("isVal: (null, not_null, true, false, unknown)"))
}

/// `fts|plfts|phfts|wfts[(lang)].value`, all or nothing.
fn fts(c: &mut Cursor, kind: ValueKind) -> Option<Operation> {
    let op =
        [("fts", FtsOp::Fts), ("plfts", FtsOp::Plain), ("phfts", FtsOp::Phrase), ("wfts", FtsOp::Websearch)]
            .into_iter()
            .find_map(|(w, op)| c.eat_str(w).then_some(op))?;
    let before = c.pos;
    let mut language = None;
    if c.eat('(') {
        let lang = crate::field::identifier(c).ok();
        if lang.is_some() && c.eat(')') {
            language = lang;
        } else {
            c.pos = before;
        }
    }
    if !c.eat('.') {
        return None;
    }
    let value = single_val(c, kind).ok()?;
    Some(Operation::Fts { op, language, value })
}

/// Operators that take no quantifier, all or nothing.
fn simple_op(c: &mut Cursor, kind: ValueKind) -> Option<Operation> {
    let op = [
        ("neq", CompareOp::Neq),
        ("cs", CompareOp::Contains),
        ("cd", CompareOp::Contained),
        ("ov", CompareOp::Overlap),
        ("sl", CompareOp::StrictlyLeft),
        ("sr", CompareOp::StrictlyRight),
        ("nxr", CompareOp::NotExtendRight),
        ("nxl", CompareOp::NotExtendLeft),
        ("adj", CompareOp::Adjacent),
    ]
    .into_iter()
    .find_map(|(w, op)| c.eat_str(w).then_some(op))?;
    if !c.eat('.') {
        return None;
    }
    let value = single_val(c, kind).ok()?;
    Some(Operation::Compare { op, quantifier: None, value })
}

/// Operators that accept `(any)`/`(all)`, all or nothing.
fn quant_op(c: &mut Cursor, kind: ValueKind) -> Option<Operation> {
    let op = [
        ("eq", CompareOp::Eq),
        ("gte", CompareOp::Gte),
        ("gt", CompareOp::Gt),
        ("lte", CompareOp::Lte),
        ("lt", CompareOp::Lt),
        ("like", CompareOp::Like),
        ("ilike", CompareOp::Ilike),
        ("match", CompareOp::Match),
        ("imatch", CompareOp::Imatch),
    ]
    .into_iter()
    .find_map(|(w, op)| c.eat_str(w).then_some(op))?;
    let quantifier = if c.eat_str("(any)") {
        Some(Quantifier::Any)
    } else if c.eat_str("(all)") {
        Some(Quantifier::All)
    } else {
        None
    };
    if !c.eat('.') {
        return None;
    }
    let value = single_val(c, kind).ok()?;
    Some(Operation::Compare { op, quantifier, value })
}

/// What a query-string filter parameter turned out to be.
#[derive(Debug, PartialEq)]
pub(crate) enum ParamFilter {
    /// A proper filter.
    Filter(EmbedPath, Filter),
    /// Not a filter; for RPC reads it is a function argument `(name, value)`.
    RpcParam(String, String),
}

/// `key=value` as a filter (`pRequestFilter`); `rpc_read` allows non-filters as arguments.
pub(crate) fn request_filter(
    key: &str,
    value: &str,
    rpc_read: bool,
) -> Result<ParamFilter, crate::RequestError> {
    let (path, field) =
        tree_path(&mut Cursor::new(key)).map_err(|e| e.into_request_error("tree path", key))?;
    let mut c = Cursor::new(value);
    match op_expr(&mut c, ValueKind::Rest) {
        Ok((negated, operation)) => Ok(ParamFilter::Filter(path, Filter { field, negated, operation })),
        Err(f) if rpc_read && !f.consumed => Ok(ParamFilter::RpcParam(field.name, value.to_string())),
        Err(f) => Err(f.err.into_request_error("filter", value)),
    }
}

/// `col->path.[not.]op.value` inside a logic tree (`pLogicFilter`), all or nothing.
pub(crate) fn logic_filter(c: &mut Cursor) -> Option<Filter> {
    let field = field(c).ok()?;
    if !c.eat('.') {
        return None;
    }
    let (negated, operation) = op_expr(c, ValueKind::Logic).ok()?;
    Some(Filter { field, negated, operation })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RequestError;

    fn cmp(op: CompareOp, q: Option<Quantifier>, v: &str) -> Operation {
        Operation::Compare { op, quantifier: q, value: v.to_string() }
    }

    fn parse(v: &str) -> Option<(bool, Operation)> {
        op_expr(&mut Cursor::new(v), ValueKind::Rest).ok()
    }

    #[test]
    fn operators() {
        use CompareOp::*;
        let cases: Vec<(&str, Option<(bool, Operation)>)> = vec![
            ("eq.1", Some((false, cmp(Eq, None, "1")))),
            ("neq.a.b,c", Some((false, cmp(Neq, None, "a.b,c")))),
            ("gt.1", Some((false, cmp(Gt, None, "1")))),
            ("gte.1", Some((false, cmp(Gte, None, "1")))),
            ("lt.1", Some((false, cmp(Lt, None, "1")))),
            ("lte.1", Some((false, cmp(Lte, None, "1")))),
            ("like.*a*", Some((false, cmp(Like, None, "*a*")))),
            ("ilike.*A*", Some((false, cmp(Ilike, None, "*A*")))),
            ("match.^a", Some((false, cmp(Match, None, "^a")))),
            ("imatch.^a", Some((false, cmp(Imatch, None, "^a")))),
            ("cs.{1,2}", Some((false, cmp(Contains, None, "{1,2}")))),
            ("cd.{1}", Some((false, cmp(Contained, None, "{1}")))),
            ("ov.[1,2]", Some((false, cmp(Overlap, None, "[1,2]")))),
            ("sl.(1,2)", Some((false, cmp(StrictlyLeft, None, "(1,2)")))),
            ("sr.(1,2)", Some((false, cmp(StrictlyRight, None, "(1,2)")))),
            ("nxr.(1,2)", Some((false, cmp(NotExtendRight, None, "(1,2)")))),
            ("nxl.(1,2)", Some((false, cmp(NotExtendLeft, None, "(1,2)")))),
            ("adj.(1,2)", Some((false, cmp(Adjacent, None, "(1,2)")))),
            ("not.eq.1", Some((true, cmp(Eq, None, "1")))),
            ("eq(any).{1,2}", Some((false, cmp(Eq, Some(Quantifier::Any), "{1,2}")))),
            ("not.like(all).{a*}", Some((true, cmp(Like, Some(Quantifier::All), "{a*}")))),
            ("eq.", Some((false, cmp(Eq, None, "")))),
            ("in.(1,2)", Some((false, Operation::In(vec!["1".into(), "2".into()])))),
            (
                "in.(1,\"a,b\",\"c\\\"d\",\"e\\\\f\")",
                Some((false, Operation::In(vec!["1".into(), "a,b".into(), "c\"d".into(), "e\\f".into()]))),
            ),
            ("in.()", Some((false, Operation::In(vec![])))),
            ("in.(\"\")", Some((false, Operation::In(vec![String::new()])))),
            ("in.( 1, 2 )", Some((false, Operation::In(vec!["1".into(), " 2 ".into()])))),
            ("is.null", Some((false, Operation::Is(IsValue::Null)))),
            ("is.NULL", Some((false, Operation::Is(IsValue::Null)))),
            ("is.not_null", Some((false, Operation::Is(IsValue::NotNull)))),
            ("not.is.True", Some((true, Operation::Is(IsValue::True)))),
            ("is.false", Some((false, Operation::Is(IsValue::False)))),
            ("is.unknown", Some((false, Operation::Is(IsValue::Unknown)))),
            ("isdistinct.a", Some((false, Operation::IsDistinct("a".into())))),
            (
                "fts.cat",
                Some((false, Operation::Fts { op: FtsOp::Fts, language: None, value: "cat".into() })),
            ),
            (
                "plfts(english).fat cat",
                Some((
                    false,
                    Operation::Fts {
                        op: FtsOp::Plain,
                        language: Some("english".into()),
                        value: "fat cat".into(),
                    },
                )),
            ),
            (
                "phfts.a",
                Some((false, Operation::Fts { op: FtsOp::Phrase, language: None, value: "a".into() })),
            ),
            (
                "not.wfts(simple).a",
                Some((
                    true,
                    Operation::Fts {
                        op: FtsOp::Websearch,
                        language: Some("simple".into()),
                        value: "a".into(),
                    },
                )),
            ),
            ("neq(any).1", None),
            ("cs(all).1", None),
            ("noop.0", None),
            ("is.maybe", None),
            ("in.1,2", None),
            ("in.(1,2", None),
            ("fts().x", None),
            ("eq().x", None),
            ("not.not.eq.1", None),
            ("eq", None),
            ("", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), want, "input {input:?}");
        }
    }

    #[test]
    fn request_filters() {
        let f = request_filter("actors.first_name", "eq.x", false).unwrap();
        let ParamFilter::Filter(path, filter) = f else { panic!("not a filter") };
        assert_eq!(path, vec!["actors".to_string()]);
        assert_eq!(filter.field.name, "first_name");

        assert_eq!(
            request_filter("a", "val", true).unwrap(),
            ParamFilter::RpcParam("a".into(), "val".into())
        );
        // PostgREST consumed `in.`/`is.`/`not.` before failing, so these stay errors for RPC.
        for v in ["in.abc", "is.maybe", "not.val"] {
            assert!(request_filter("a", v, true).is_err(), "{v}");
        }
        let err = request_filter("id", "val", false).unwrap_err();
        assert_eq!(
            err,
            RequestError::Parse {
                message: "\"failed to parse filter (val)\" (line 1, column 1)".into(),
                details: "unexpected \"v\" expecting \"not\" or operator (eq, gt, ...)".into(),
            }
        );
        let err = request_filter("@x", "eq.1", true).unwrap_err();
        let RequestError::Parse { message, .. } = err else { panic!() };
        assert_eq!(message, "\"failed to parse tree path (@x)\" (line 1, column 1)");
    }
}
