//! `jwt-role-claim-key`: where the role is in the claims. PostgREST's path syntax — `.role`,
//! `.realm_access.roles[0]`, `."https://example.com/role"` — with an optional leading `$`.

use serde_json::{Map, Value};

/// One step of a role claim path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A parsed `jwt-role-claim-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolePath(Vec<Step>);

impl Default for RolePath {
    fn default() -> Self {
        RolePath(vec![Step::Key("role".into())])
    }
}

impl RolePath {
    /// Parses the path; the error says what is wrong.
    pub fn parse(text: &str) -> Result<RolePath, String> {
        let s = text.trim().strip_prefix('$').unwrap_or(text.trim());
        let chars: Vec<char> = s.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '.' if chars.get(i + 1) == Some(&'"') => {
                    let end =
                        chars[i + 2..].iter().position(|&c| c == '"').ok_or("unterminated quoted key")?;
                    steps.push(Step::Key(chars[i + 2..i + 2 + end].iter().collect()));
                    i += end + 3;
                }
                '.' => {
                    let len = chars[i + 1..]
                        .iter()
                        .take_while(|c| c.is_alphanumeric() || **c == '_' || **c == '-')
                        .count();
                    if len == 0 {
                        return Err(format!("expected a key at position {}", i + 1));
                    }
                    steps.push(Step::Key(chars[i + 1..i + 1 + len].iter().collect()));
                    i += len + 1;
                }
                '[' => {
                    let end = chars[i..].iter().position(|&c| c == ']').ok_or("unterminated index")?;
                    let n: String = chars[i + 1..i + end].iter().collect();
                    steps.push(Step::Index(n.trim().parse().map_err(|_| format!("bad index {n:?}"))?));
                    i += end + 1;
                }
                c => return Err(format!("unexpected {c:?} at position {i}")),
            }
        }
        if steps.is_empty() {
            return Err("empty path".into());
        }
        Ok(RolePath(steps))
    }

    /// The role the path points at, if it is a non-empty string.
    pub fn lookup<'a>(&self, claims: &'a Map<String, Value>) -> Option<&'a str> {
        let mut steps = self.0.iter();
        let mut value = match steps.next()? {
            Step::Key(k) => claims.get(k)?,
            Step::Index(_) => return None,
        };
        for step in steps {
            value = match step {
                Step::Key(k) => value.get(k)?,
                Step::Index(i) => value.get(*i)?,
            };
        }
        value.as_str().filter(|s| !s.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_find_roles() {
        let claims = json!({"role": "a", "realm_access": {"roles": ["b", "c"]}, "https://x.io/role": "d"});
        let claims = claims.as_object().unwrap();
        for (path, want) in [
            (".role", Some("a")),
            ("$.role", Some("a")),
            (".realm_access.roles[1]", Some("c")),
            (".\"https://x.io/role\"", Some("d")),
            (".missing", None),
        ] {
            assert_eq!(RolePath::parse(path).unwrap().lookup(claims), want, "{path}");
        }
        assert!(RolePath::parse("role").is_err());
        assert!(RolePath::parse(".a[").is_err());
    }
}
