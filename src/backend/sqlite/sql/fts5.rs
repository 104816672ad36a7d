//! PostgreSQL text-search queries (`fts`, `plfts`, `phfts`, `wfts`) as SQLite FTS5 queries.
//!
//! Every word goes out double-quoted, so FTS5's own query syntax (column filters, `NEAR`,
//! `^`) never comes from the URL; only the operators PostgreSQL's query functions define are
//! mapped: `&` → `AND`, `|` → `OR`, `& !` → `NOT` (FTS5's NOT is binary), `<->` → `+` (the
//! next word), `:*` → a prefix. What FTS5 cannot say — a negation with nothing before it,
//! `<N>` distances, weights — is refused rather than answered differently.

use rowgate_request::FtsOp;

/// The FTS5 query for a filter's value, `None` when it has no words (PostgreSQL's empty
/// query, which matches nothing), or why it cannot be expressed.
pub fn query(op: FtsOp, value: &str) -> Result<Option<String>, String> {
    let q = match op {
        FtsOp::Plain => words(value).map(|w| quote(&w)).collect::<Vec<_>>().join(" AND "),
        FtsOp::Phrase => {
            let w: Vec<String> = words(value).collect();
            if w.is_empty() {
                String::new()
            } else {
                quote(&w.join(" "))
            }
        }
        FtsOp::Websearch => websearch(value)?,
        FtsOp::Fts => tsquery(value)?,
    };
    Ok((!q.is_empty()).then_some(q))
}

/// The words of free text, as PostgreSQL's parser splits it (letters and digits).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_owned)
}

fn quote(word: &str) -> String {
    format!("\"{}\"", word.replace('"', "\"\""))
}

/// `websearch_to_tsquery`: `"a phrase"`, `-word`, `or`, and everything else AND-ed.
fn websearch(value: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut pending = " AND ";
    let mut rest = value;
    while !rest.is_empty() {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let negated = rest.starts_with('-');
        if negated {
            rest = &rest[1..];
        }
        let term = if let Some(after) = rest.strip_prefix('"') {
            let end = after.find('"').unwrap_or(after.len());
            let phrase: Vec<String> = words(&after[..end]).collect();
            rest = after.get(end + 1..).unwrap_or("");
            (!phrase.is_empty()).then(|| quote(&phrase.join(" ")))
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let token = &rest[..end];
            rest = &rest[end..];
            if token.eq_ignore_ascii_case("or") && !negated {
                if !out.is_empty() {
                    pending = " OR ";
                }
                continue;
            }
            let w: Vec<String> = words(token).collect();
            (!w.is_empty()).then(|| w.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" + "))
        };
        let Some(term) = term else { continue };
        if out.is_empty() {
            if negated {
                return Err("a search that starts with an excluded word".into());
            }
        } else if negated {
            if pending == " OR " {
                return Err("\"or\" before an excluded word".into());
            }
            out.push_str(" NOT ");
        } else {
            out.push_str(pending);
        }
        out.push_str(&term);
        pending = " AND ";
    }
    Ok(out)
}

/// `to_tsquery`: words (`word:*` a prefix), `&`, `|`, `!`, `<->`, parentheses.
fn tsquery(value: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = value.chars().peekable();
    let mut expect_operand = true;
    let mut depth = 0usize;
    // The last operator was `<->`: a word must follow.
    let mut phrase = false;
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '&' | '|' => {
                chars.next();
                if expect_operand {
                    return Err(format!("'{c}' without a word before it"));
                }
                let negated = skip_spaces_then(&mut chars, '!');
                match (c, negated) {
                    ('&', true) => out.push_str(" NOT "),
                    ('&', false) => out.push_str(" AND "),
                    ('|', false) => out.push_str(" OR "),
                    _ => return Err("'| !': FTS5 has no negation of its own".into()),
                }
                expect_operand = true;
            }
            '!' => return Err("'!' with nothing before it: FTS5 has no negation of its own".into()),
            '<' => {
                let op: String = chars.by_ref().take_while(|&c| c != '>').collect();
                if op != "<-" || expect_operand {
                    return Err(format!("the operator {op}>: only <-> (followed by) is supported"));
                }
                // FTS5's `+` joins words into a phrase, not groups.
                if !out.ends_with('"') {
                    return Err("<-> after a group: only words can follow each other".into());
                }
                out.push_str(" + ");
                expect_operand = true;
                phrase = true;
            }
            '(' => {
                chars.next();
                if !expect_operand || phrase {
                    return Err("'(' after a word or <->".into());
                }
                depth += 1;
                out.push(c);
            }
            ')' => {
                chars.next();
                if expect_operand || depth == 0 {
                    return Err("a ')' without its '(' or after an operator".into());
                }
                depth -= 1;
                out.push(c);
            }
            _ => {
                let mut token = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || "&|!()<".contains(c) {
                        break;
                    }
                    token.push(c);
                    chars.next();
                }
                let (word, label) = token.split_once(':').unwrap_or((&token, ""));
                let prefix = match label {
                    "" => false,
                    "*" => true,
                    other => return Err(format!("the weight or label :{other}")),
                };
                let w: Vec<String> = words(word.trim_matches('\'')).collect();
                if w.is_empty() {
                    return Err(format!("{token:?} has no word in it"));
                }
                if !expect_operand {
                    return Err(format!("two words without an operator between them near {token:?}"));
                }
                out.push_str(&w.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" + "));
                if prefix {
                    out.push('*');
                }
                expect_operand = false;
                phrase = false;
            }
        }
    }
    if expect_operand && !out.is_empty() {
        return Err("an operator without a word after it".into());
    }
    if depth > 0 {
        return Err("a '(' without its ')'".into());
    }
    Ok(out)
}

/// Skips spaces; then, if the next character is `c`, consumes it and says so.
fn skip_spaces_then(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, c: char) -> bool {
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    if chars.peek() == Some(&c) {
        chars.next();
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(op: FtsOp, v: &str) -> Result<Option<String>, String> {
        query(op, v)
    }

    #[test]
    fn plain_phrase_and_websearch() {
        assert_eq!(q(FtsOp::Plain, "fat  cats!"), Ok(Some(r#""fat" AND "cats""#.into())));
        assert_eq!(q(FtsOp::Phrase, "fat cats"), Ok(Some(r#""fat cats""#.into())));
        assert_eq!(q(FtsOp::Plain, " ,; "), Ok(None));
        assert_eq!(
            q(FtsOp::Websearch, r#""sad cat" or fat -rat dog"#),
            Ok(Some(r#""sad cat" OR "fat" NOT "rat" AND "dog""#.into()))
        );
        assert!(q(FtsOp::Websearch, "-rat").is_err());
    }

    #[test]
    fn tsquery_operators() {
        assert_eq!(q(FtsOp::Fts, "fat & (rat | cat)"), Ok(Some(r#""fat" AND ("rat" OR "cat")"#.into())));
        assert_eq!(q(FtsOp::Fts, "fat & !rat"), Ok(Some(r#""fat" NOT "rat""#.into())));
        assert_eq!(q(FtsOp::Fts, "super:*"), Ok(Some(r#""super"*"#.into())));
        assert_eq!(q(FtsOp::Fts, "fat <-> cat"), Ok(Some(r#""fat" + "cat""#.into())));
        // FTS5's own syntax never passes through: it is quoted as words.
        assert_eq!(q(FtsOp::Fts, "NEAR"), Ok(Some(r#""NEAR""#.into())));
        assert!(q(FtsOp::Fts, "!rat").is_err());
        assert!(q(FtsOp::Fts, "fat <2> cat").is_err());
        assert!(q(FtsOp::Fts, "fat:A").is_err());
        assert!(q(FtsOp::Fts, "fat cat").is_err());
        assert!(q(FtsOp::Fts, "fat &").is_err());
        // Parentheses balanced and where an operand goes: never an FTS5 syntax error.
        for bad in ["(fat", "()", "fat ) & cat", "fat (cat)", "(fat &) cat"] {
            assert!(q(FtsOp::Fts, bad).is_err(), "{bad}");
        }
        for bad in ["(a|b) <-> c", "a <-> (b|c)", "a:* <-> b"] {
            assert!(q(FtsOp::Fts, bad).is_err(), "{bad}");
        }
    }
}
