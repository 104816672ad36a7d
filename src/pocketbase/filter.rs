//! PocketBase's filter language, as its `filter=` parameter and its rules write it: text →
//! [`Filter`]. Pure: names are resolved against a collection when the filter is compiled
//! (`compile.rs`). `&&` binds tighter than `||`, as in PocketBase.

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `left op right`.
    Compare {
        /// The left operand.
        left: Operand,
        /// The operator.
        sign: Sign,
        /// The right operand.
        right: Operand,
    },
    /// Every one holds (`&&`).
    All(Vec<Filter>),
    /// One holds (`||`).
    Any(Vec<Filter>),
}

/// An operand as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A field path, a macro (`@now`), `@request.*`, `@collection.*`, `true`, `false`, `null`,
    /// with its modifier (`:lower`) still in it.
    Identifier(String),
    /// A quoted text, unescaped.
    Text(String),
    /// A number as written.
    Number(String),
    /// `name(args)`.
    Function {
        /// Its name.
        name: String,
        /// Its arguments.
        args: Vec<Operand>,
    },
}

/// A comparison operator: `=`, `!=`, `~`, `!~`, `<`, `<=`, `>`, `>=`, each also as any-of
/// (`?=`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sign {
    /// The comparison.
    pub op: SignOp,
    /// `?`: at least one of a multi-valued operand's values.
    pub any: bool,
}

/// The comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignOp {
    /// `=`
    Eq,
    /// `!=`
    Neq,
    /// `~`: contains (a `LIKE` pattern).
    Like,
    /// `!~`
    NotLike,
    /// `<`
    Lt,
    /// `<=`
    Lte,
    /// `>`
    Gt,
    /// `>=`
    Gte,
}

/// Why a filter did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

/// Nesting deeper than this is refused, so a hostile filter cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

/// Parses `text`; an empty (or blank) filter is `None`.
pub fn parse(text: &str) -> Result<Option<Filter>, ParseError> {
    let tokens = lex(text)?;
    if tokens.is_empty() {
        return Ok(None);
    }
    let mut p = Parser { tokens, at: 0 };
    let filter = p.any(0)?;
    match p.tokens.get(p.at) {
        None => Ok(Some(filter)),
        Some(t) => Err(ParseError(format!("unexpected {t:?}"))),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    Comma,
    And,
    Or,
    Sign(Sign),
    Identifier(String),
    Text(String),
    Number(String),
}

const SIGNS: [(&str, SignOp, bool); 16] = [
    ("?!=", SignOp::Neq, true),
    ("?!~", SignOp::NotLike, true),
    ("?<=", SignOp::Lte, true),
    ("?>=", SignOp::Gte, true),
    ("?=", SignOp::Eq, true),
    ("?~", SignOp::Like, true),
    ("?<", SignOp::Lt, true),
    ("?>", SignOp::Gt, true),
    ("!=", SignOp::Neq, false),
    ("!~", SignOp::NotLike, false),
    ("<=", SignOp::Lte, false),
    (">=", SignOp::Gte, false),
    ("=", SignOp::Eq, false),
    ("~", SignOp::Like, false),
    ("<", SignOp::Lt, false),
    (">", SignOp::Gt, false),
];

fn lex(text: &str) -> Result<Vec<Token>, ParseError> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if let Some(comment) = rest.strip_prefix("//") {
            rest = comment.find('\n').map_or("", |end| &comment[end..]);
            continue;
        }
        let (token, len) = match c {
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            ',' => (Token::Comma, 1),
            '\'' | '"' => text_token(rest, c)?,
            _ if rest.starts_with("&&") => (Token::And, 2),
            _ if rest.starts_with("||") => (Token::Or, 2),
            _ if c.is_ascii_digit() || ((c == '-' || c == '+' || c == '.') && starts_number(&rest[1..])) => {
                let len = 1 + rest[1..]
                    .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
                    .unwrap_or(rest.len() - 1);
                let number = &rest[..len];
                if number.matches('.').count() > 1 {
                    return Err(ParseError(format!("invalid number {number}")));
                }
                (Token::Number(number.to_owned()), len)
            }
            _ if c.is_alphanumeric() || c == '_' || c == '@' || c == '#' => {
                let len = rest
                    .find(|ch: char| !(ch.is_alphanumeric() || matches!(ch, '_' | '.' | ':' | '@' | '#')))
                    .unwrap_or(rest.len());
                (Token::Identifier(rest[..len].to_owned()), len)
            }
            _ => match SIGNS.iter().find(|(s, ..)| rest.starts_with(s)) {
                Some((s, op, any)) => (Token::Sign(Sign { op: *op, any: *any }), s.len()),
                None => return Err(ParseError(format!("unexpected character {c:?}"))),
            },
        };
        tokens.push(token);
        rest = &rest[len..];
    }
    Ok(tokens)
}

fn starts_number(rest: &str) -> bool {
    rest.starts_with(|c: char| c.is_ascii_digit())
        || rest.strip_prefix('.').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
}

/// A quoted text starting at `rest`: a backslash escapes the quote.
fn text_token(rest: &str, quote: char) -> Result<(Token, usize), ParseError> {
    let mut value = String::new();
    let mut chars = rest.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, next)) if next == quote => value.push(next),
                Some((_, next)) => {
                    value.push('\\');
                    value.push(next);
                }
                None => break,
            },
            _ if c == quote => return Ok((Token::Text(value), i + 1)),
            _ => value.push(c),
        }
    }
    Err(ParseError("unterminated text".into()))
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn any(&mut self, depth: usize) -> Result<Filter, ParseError> {
        let mut terms = vec![self.all(depth)?];
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            terms.push(self.all(depth)?);
        }
        Ok(if terms.len() == 1 { terms.remove(0) } else { Filter::Any(terms) })
    }

    fn all(&mut self, depth: usize) -> Result<Filter, ParseError> {
        let mut terms = vec![self.primary(depth)?];
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            terms.push(self.primary(depth)?);
        }
        Ok(if terms.len() == 1 { terms.remove(0) } else { Filter::All(terms) })
    }

    fn primary(&mut self, depth: usize) -> Result<Filter, ParseError> {
        if depth >= MAX_DEPTH {
            return Err(ParseError("the filter is nested too deeply".into()));
        }
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            let inner = self.any(depth + 1)?;
            return match self.next() {
                Some(Token::Close) => Ok(inner),
                _ => Err(ParseError("a group is not closed".into())),
            };
        }
        let left = self.operand(depth)?;
        let sign = match self.next() {
            Some(Token::Sign(s)) => s,
            other => return Err(ParseError(format!("expected an operator, found {other:?}"))),
        };
        let right = self.operand(depth)?;
        Ok(Filter::Compare { left, sign, right })
    }

    fn operand(&mut self, depth: usize) -> Result<Operand, ParseError> {
        match self.next() {
            Some(Token::Text(t)) => Ok(Operand::Text(t)),
            Some(Token::Number(n)) => Ok(Operand::Number(n)),
            Some(Token::Identifier(name)) if self.peek() == Some(&Token::Open) => {
                if depth >= MAX_DEPTH {
                    return Err(ParseError("the filter is nested too deeply".into()));
                }
                self.at += 1;
                let mut args = Vec::new();
                if self.peek() == Some(&Token::Close) {
                    self.at += 1;
                    return Ok(Operand::Function { name, args });
                }
                loop {
                    args.push(self.operand(depth + 1)?);
                    match self.next() {
                        Some(Token::Comma) => continue,
                        Some(Token::Close) => return Ok(Operand::Function { name, args }),
                        other => return Err(ParseError(format!("expected , or ), found {other:?}"))),
                    }
                }
            }
            Some(Token::Identifier(name)) => Ok(Operand::Identifier(name)),
            other => Err(ParseError(format!("expected an operand, found {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Operand {
        Operand::Identifier(s.into())
    }

    fn cmp(left: Operand, op: SignOp, right: Operand) -> Filter {
        Filter::Compare { left, sign: Sign { op, any: false }, right }
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let f = parse("title = 'Hello' || views >= 1 && views < 2").unwrap().unwrap();
        assert_eq!(
            f,
            Filter::Any(vec![
                cmp(id("title"), SignOp::Eq, Operand::Text("Hello".into())),
                Filter::All(vec![
                    cmp(id("views"), SignOp::Gte, Operand::Number("1".into())),
                    cmp(id("views"), SignOp::Lt, Operand::Number("2".into())),
                ]),
            ])
        );
    }

    #[test]
    fn groups_quotes_comments_and_any_of() {
        let f = parse("(a ?!= \"x\\\"y\") // a comment\n&& b:lower ~ 'it\\'s'").unwrap().unwrap();
        assert_eq!(
            f,
            Filter::All(vec![
                Filter::Compare {
                    left: id("a"),
                    sign: Sign { op: SignOp::Neq, any: true },
                    right: Operand::Text("x\"y".into())
                },
                cmp(id("b:lower"), SignOp::Like, Operand::Text("it's".into())),
            ])
        );
        assert_eq!(
            parse("geoDistance(lon, lat, 1.5, -2) < 25").unwrap().unwrap(),
            cmp(
                Operand::Function {
                    name: "geoDistance".into(),
                    args: vec![
                        id("lon"),
                        id("lat"),
                        Operand::Number("1.5".into()),
                        Operand::Number("-2".into())
                    ]
                },
                SignOp::Lt,
                Operand::Number("25".into())
            )
        );
        assert_eq!(parse("  // nothing\n").unwrap(), None);
    }

    #[test]
    fn malformed_filters_are_errors() {
        for bad in
            ["title = 'Hello' &&", "title 'Hello'", "()", "(a = 1", "a = 'x", "a == 1", "a = 1)", "a $ 1"]
        {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let deep = format!("{}a = 1{}", "(".repeat(100), ")".repeat(100));
        assert!(parse(&deep).is_err());
    }
}
