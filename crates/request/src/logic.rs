//! `and=(...)`, `or=(...)`, `not.and=(...)`, `not.or=(...)` trees, as PostgREST's
//! `pLogicTree`: filters inside are `col.[not.]op.value`, values may be double-quoted.

use crate::cursor::{Cursor, PErr};
use crate::field::field_name;
use crate::filter::logic_filter;
use crate::{EmbedPath, LogicOp, LogicTree, RequestError, MAX_DEPTH};

/// `a.b.not.or=(...)`: the key gives the embed path and the operator, the value the operands.
pub(crate) fn request_logic(key: &str, value: &str) -> Result<(EmbedPath, LogicTree), RequestError> {
    let (path, op) =
        logic_path(&mut Cursor::new(key)).map_err(|e| e.into_request_error("logic path", key))?;
    // PostgREST parses `op` and `value` glued together, so columns count the operator too.
    let input = format!("{op}{value}");
    let tree =
        logic_tree(&mut Cursor::new(&input), 0).map_err(|e| e.into_request_error("logic tree", value))?;
    Ok((path, tree))
}

/// `pLogicPath`: dot-separated names; the last is the operator, any `not` negates it.
fn logic_path(c: &mut Cursor) -> Result<(EmbedPath, String), PErr> {
    let mut names = vec![field_name(c)?];
    while c.eat('.') {
        names.push(field_name(c)?);
    }
    let op = names.pop().unwrap_or_default();
    let negated = names.iter().any(|n| n == "not") || op == "not";
    let path = names.into_iter().filter(|n| n != "not").collect();
    Ok((path, if negated { format!("not.{op}") } else { op }))
}

/// One node: a filter if it parses as one, otherwise `[not.]and(...)`/`[not.]or(...)`.
fn logic_tree(c: &mut Cursor, depth: usize) -> Result<LogicTree, PErr> {
    if depth > MAX_DEPTH {
        return Err(c.err("less deeply nested logic trees"));
    }
    let start = c.pos;
    if let Some(f) = logic_filter(c) {
        return Ok(LogicTree::Filter(f));
    }
    c.pos = start;
    let negated = c.eat_str("not.");
    let op = if c.eat_str("and") {
        LogicOp::And
    } else if c.eat_str("or") {
        LogicOp::Or
    } else if negated {
        return Err(c.err("logic operator (and, or)"));
    } else {
        return Err(
            c.err("field name (* or [a..z0..9_$]), negation operator (not) or logic operator (and, or)")
        );
    };
    c.skip_ws();
    if !c.eat('(') {
        return Err(c.err("\"(\""));
    }
    c.skip_ws();
    let mut children = vec![logic_tree(c, depth + 1)?];
    loop {
        c.skip_ws();
        if !c.eat(',') {
            break;
        }
        c.skip_ws();
        children.push(logic_tree(c, depth + 1)?);
    }
    if !c.eat(')') {
        return Err(c.err("\",\" or \")\""));
    }
    c.skip_ws();
    Ok(LogicTree::Expr { negated, op, children })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompareOp, Field, Filter, IsValue, Operation};

    fn f(name: &str, negated: bool, operation: Operation) -> LogicTree {
        LogicTree::Filter(Filter {
            field: Field { name: name.into(), json_path: vec![] },
            negated,
            operation,
        })
    }

    fn eq(v: &str) -> Operation {
        Operation::Compare { op: CompareOp::Eq, quantifier: None, value: v.into() }
    }

    #[test]
    fn trees() {
        let (path, tree) =
            request_logic("or", "(a.eq.1,and(b.gt.2,c.not.is.null),not.or(d.eq.1,e.eq.\"x,y\"))").unwrap();
        assert!(path.is_empty());
        let want = LogicTree::Expr {
            negated: false,
            op: LogicOp::Or,
            children: vec![
                f("a", false, eq("1")),
                LogicTree::Expr {
                    negated: false,
                    op: LogicOp::And,
                    children: vec![
                        f(
                            "b",
                            false,
                            Operation::Compare { op: CompareOp::Gt, quantifier: None, value: "2".into() },
                        ),
                        f("c", true, Operation::Is(IsValue::Null)),
                    ],
                },
                LogicTree::Expr {
                    negated: true,
                    op: LogicOp::Or,
                    children: vec![f("d", false, eq("1")), f("e", false, eq("x,y"))],
                },
            ],
        };
        assert_eq!(tree, want);
    }

    #[test]
    fn paths_and_values() {
        type Case<'a> = (&'a str, &'a str, Option<(Vec<&'a str>, LogicTree)>);
        let cases: &[Case] = &[
            (
                "not.and",
                "(a.eq.1)",
                Some((
                    vec![],
                    LogicTree::Expr {
                        negated: true,
                        op: LogicOp::And,
                        children: vec![f("a", false, eq("1"))],
                    },
                )),
            ),
            (
                "actors.or",
                "( a.eq.x.y , b.eq.{1,2} )",
                Some((
                    vec!["actors"],
                    LogicTree::Expr {
                        negated: false,
                        op: LogicOp::Or,
                        children: vec![f("a", false, eq("x.y ")), f("b", false, eq("{1,2}"))],
                    },
                )),
            ),
            (
                "a.not.or",
                "(x.in.(1,2))",
                Some((
                    vec!["a"],
                    LogicTree::Expr {
                        negated: true,
                        op: LogicOp::Or,
                        children: vec![f("x", false, Operation::In(vec!["1".into(), "2".into()]))],
                    },
                )),
            ),
            ("or", "()", None),
            ("or", "(id.in.1,2,id.eq.3)", None),
            ("or", ")(", None),
            ("and", "(ord(id.eq.1),id.eq.2)", None),
            ("or", "(id.eq.1,not.xor(id.eq.2))", None),
            ("or", "(not.c.is.null)", None),
            ("or", "(a.eq.1", None),
        ];
        for (k, v, want) in cases {
            let got = request_logic(k, v).ok();
            let want = want.clone().map(|(p, t)| (p.into_iter().map(String::from).collect::<Vec<_>>(), t));
            assert_eq!(got, want, "{k}={v}");
        }
    }

    #[test]
    fn error_positions() {
        let RequestError::Parse { message, details } = request_logic("or", "()").unwrap_err() else {
            panic!()
        };
        assert_eq!(message, "\"failed to parse logic tree (())\" (line 1, column 4)");
        assert!(details.starts_with("unexpected \")\""), "{details}");
        let RequestError::Parse { message, .. } =
            request_logic("or", "(id.eq.1,not.xor(id.eq.2))").unwrap_err()
        else {
            panic!()
        };
        assert!(message.ends_with("(line 1, column 16)"), "{message}");
    }

    #[test]
    fn depth_is_capped() {
        let deep = format!("({}a.eq.1{})", "or(".repeat(200), ")".repeat(200));
        assert!(request_logic("or", &deep).is_err());
        let ok = format!("({}a.eq.1{})", "or(".repeat(10), ")".repeat(10));
        assert!(request_logic("or", &ok).is_ok());
    }
}
