//! `jwt-role-claim-key`: where the role is in the claims. PostgREST 16's JSONPath (RFC 9535)
//! as far as a role needs it — `$.role`, `$.realm_access.roles[0]`, `$['https://x.io/role']`,
//! `[-1]`, and a filter picking the first matching string of an array, `[?(@ == 'author')]`,
//! `[?@ != 'x']`, `[?search(@, '^au')]` — and PostgREST's older syntax it still reads (`.role`,
//! `."https://x.io/role"`, `[?(@ ^== "au")]`, `==^`, `*==`).

use regex::Regex;
use serde_json::{Map, Value};

/// One step of a role claim path.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(i64),
    /// The first string of an array that passes.
    Filter(Test),
}

/// What a filter asks of a string.
#[derive(Debug, Clone)]
enum Test {
    Equals(String),
    Differs(String),
    StartsWith(String),
    EndsWith(String),
    Contains(String),
    /// `search(@, re)`: the pattern matches somewhere in the string.
    Search(Regex),
}

impl Test {
    fn passes(&self, s: &str) -> bool {
        match self {
            Test::Equals(v) => s == v,
            Test::Differs(v) => s != v,
            Test::StartsWith(v) => s.starts_with(v.as_str()),
            Test::EndsWith(v) => s.ends_with(v.as_str()),
            Test::Contains(v) => s.contains(v.as_str()),
            Test::Search(re) => re.is_match(s),
        }
    }
}

/// A parsed `jwt-role-claim-key` (two are equal when written alike).
#[derive(Debug, Clone)]
pub struct RolePath {
    text: String,
    steps: Vec<Step>,
}

impl Default for RolePath {
    fn default() -> Self {
        RolePath { text: "$.role".into(), steps: vec![Step::Key("role".into())] }
    }
}

impl PartialEq for RolePath {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for RolePath {}

impl RolePath {
    /// Parses the path; the error says what is wrong.
    pub fn parse(text: &str) -> Result<RolePath, String> {
        let text = text.trim();
        let mut p = Cursor { chars: text.strip_prefix('$').unwrap_or(text).chars().collect(), at: 0 };
        let mut steps = Vec::new();
        while let Some(c) = p.peek() {
            match c {
                '.' => {
                    p.at += 1;
                    if p.peek() == Some('"') {
                        steps.push(Step::Key(p.quoted()?));
                    } else {
                        let name = p.take_while(|c| c.is_alphanumeric() || "_-$@".contains(c));
                        if name.is_empty() {
                            return Err(format!("expected a key at position {}", p.at));
                        }
                        steps.push(Step::Key(name));
                    }
                }
                '[' => {
                    p.at += 1;
                    p.skip_spaces();
                    steps.push(match p.peek() {
                        Some('\'' | '"') => Step::Key(p.quoted()?),
                        Some('?') => {
                            p.at += 1;
                            Step::Filter(p.filter()?)
                        }
                        _ => {
                            let n = p.take_while(|c| c.is_ascii_digit() || c == '-');
                            Step::Index(
                                n.parse().map_err(|_| format!("bad index {n:?} at position {}", p.at))?,
                            )
                        }
                    });
                    p.skip_spaces();
                    if p.peek() != Some(']') {
                        return Err(format!("expected ']' at position {}", p.at));
                    }
                    p.at += 1;
                }
                c => return Err(format!("unexpected {c:?} at position {}", p.at)),
            }
        }
        if steps.is_empty() {
            return Err("empty path".into());
        }
        Ok(RolePath { text: text.to_owned(), steps })
    }

    /// The role the path points at, if it is a non-empty string.
    pub fn lookup<'a>(&self, claims: &'a Map<String, Value>) -> Option<&'a str> {
        let mut steps = self.steps.iter();
        let mut value = match steps.next()? {
            Step::Key(k) => claims.get(k)?,
            _ => return None,
        };
        for step in steps {
            value = match step {
                Step::Key(k) => value.get(k)?,
                Step::Index(i) => {
                    let items = value.as_array()?;
                    let at = if *i < 0 {
                        items.len().checked_sub(i.unsigned_abs() as usize)?
                    } else {
                        *i as usize
                    };
                    items.get(at)?
                }
                Step::Filter(test) => {
                    value.as_array()?.iter().find(|v| v.as_str().is_some_and(|s| test.passes(s)))?
                }
            };
        }
        value.as_str().filter(|s| !s.is_empty())
    }
}

struct Cursor {
    chars: Vec<char>,
    at: usize,
}

impl Cursor {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(' ') {
            self.at += 1;
        }
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> String {
        let start = self.at;
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    /// A string in single or double quotes, with `\` escaping the next character.
    fn quoted(&mut self) -> Result<String, String> {
        let quote = self.peek().filter(|q| *q == '\'' || *q == '"').ok_or("expected a quoted string")?;
        self.at += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err("unterminated quoted string".into()),
                Some(c) if c == quote => {
                    self.at += 1;
                    return Ok(out);
                }
                Some('\\') => {
                    self.at += 1;
                    out.extend(self.peek());
                    self.at += 1;
                }
                Some(c) => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// After `[?`: `(@ OP 'text')`, `@ OP 'text'` or `search(@, 'pattern')`.
    fn filter(&mut self) -> Result<Test, String> {
        self.skip_spaces();
        let parenthesized = self.peek() == Some('(');
        if parenthesized {
            self.at += 1;
            self.skip_spaces();
        }
        let test = if self.peek() == Some('@') {
            self.at += 1;
            self.skip_spaces();
            let op = self.take_while(|c| "=!^*".contains(c));
            self.skip_spaces();
            let value = self.quoted()?;
            match op.as_str() {
                "==" => Test::Equals(value),
                "!=" => Test::Differs(value),
                "^==" => Test::StartsWith(value),
                "==^" => Test::EndsWith(value),
                "*==" => Test::Contains(value),
                other => return Err(format!("unsupported filter operator {other:?}")),
            }
        } else if self.take_while(|c| c.is_ascii_alphabetic()) == "search" {
            self.skip_spaces();
            let args = self.take_while(|c| c == '(' || c == '@' || c == ',' || c == ' ');
            if args.replace(' ', "") != "(@," {
                return Err("search() takes @ and a pattern".into());
            }
            let pattern = self.quoted()?;
            self.skip_spaces();
            if self.peek() != Some(')') {
                return Err("expected ')' after search's pattern".into());
            }
            self.at += 1;
            Test::Search(Regex::new(&pattern).map_err(|e| format!("bad pattern: {e}"))?)
        } else {
            return Err("a filter compares @ with a string, or is search(@, pattern)".into());
        };
        self.skip_spaces();
        if parenthesized {
            if self.peek() != Some(')') {
                return Err(format!("expected ')' at position {}", self.at));
            }
            self.at += 1;
        }
        Ok(test)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_find_roles() {
        let claims = json!({
            "role": "a",
            "realm_access": {"roles": ["other", "postgrest_test_author", "b"]},
            "https://x.io/role": "d",
            "https://www.example.com/roles": [{"value": "e"}]
        });
        let claims = claims.as_object().unwrap();
        for (path, want) in [
            (".role", Some("a")),
            ("$.role", Some("a")),
            (".realm_access.roles[1]", Some("postgrest_test_author")),
            ("$.realm_access.roles[-1]", Some("b")),
            (".\"https://x.io/role\"", Some("d")),
            ("$['https://x.io/role']", Some("d")),
            ("$[\"https://www.example.com/roles\"][0].value", Some("e")),
            ("$.realm_access.roles[?(@ == \"postgrest_test_author\")]", Some("postgrest_test_author")),
            ("$.realm_access.roles[?@ != 'other']", Some("postgrest_test_author")),
            ("$.realm_access.roles[?search(@, '^post')]", Some("postgrest_test_author")),
            (".realm_access.roles[?(@ ^== \"postgrest\")]", Some("postgrest_test_author")),
            (".realm_access.roles[?(@ ==^ \"_author\")]", Some("postgrest_test_author")),
            (".realm_access.roles[?(@ *== \"test\")]", Some("postgrest_test_author")),
            ("$.realm_access.roles[?(@ == 'nobody')]", None),
            (".missing", None),
        ] {
            assert_eq!(RolePath::parse(path).unwrap().lookup(claims), want, "{path}");
        }
        assert!(RolePath::parse("role").is_err());
        assert!(RolePath::parse(".a[").is_err());
        assert!(RolePath::parse("$.a[?(@ ~ 'x')]").is_err());
    }
}
