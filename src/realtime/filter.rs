//! A `postgres_changes` binding's `filter`: `column=op.value` conditions joined by commas (all
//! must hold), each operator optionally negated with `not.`. Supabase Realtime's operators
//! (`eq, neq, lt, lte, gt, gte, in`, and since 2026 `like, ilike, match, imatch, is,
//! isdistinct`), with PostgREST's quoting (`name=eq."a,b"`, `id=in.(1,2,3)`), evaluated
//! against a change's record as its typed JSON: numbers compare as numbers, text by its bytes
//! (the C collation), and a NULL never matches, as in SQL. Pure.

use serde_json::{Map, Value};

/// At most this many values in an `in` list (Supabase's limit).
const MAX_IN_VALUES: usize = 100;

/// The longest `like`, `ilike`, `match` or `imatch` pattern, in bytes: every change of the table
/// is tested against it.
pub const MAX_PATTERN: usize = 512;

/// The largest automaton a pattern may compile to (past it, the pattern is refused as too
/// complex).
const PATTERN_LIMIT: usize = 128 * 1024;

/// The cache a pattern's lazy DFA fills as it matches (one, on the thread that matches patterns).
const PATTERN_CACHE: usize = 64 * 1024;

/// A filter's conditions, all of which must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter(pub Vec<Condition>);

/// One `column=op.value` condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The column.
    pub column: String,
    /// `not.`: the condition's opposite (a NULL still matches neither).
    pub negated: bool,
    /// The test.
    pub op: Op,
}

/// A condition's test.
#[derive(Debug, Clone)]
pub enum Op {
    /// `eq`, `neq`, `lt`, `lte`, `gt`, `gte`.
    Compare(Cmp, String),
    /// `in.(a,b)`.
    In(Vec<String>),
    /// `like`, `ilike`, `match` or `imatch`.
    Pattern(Pattern),
    /// `is.null|not_null|true|false|unknown`.
    Is(IsValue),
    /// `isdistinct.value`.
    IsDistinct(String),
}

impl PartialEq for Op {
    fn eq(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::Compare(a, x), Op::Compare(b, y)) => a == b && x == y,
            (Op::In(a), Op::In(b)) => a == b,
            (Op::Pattern(a), Op::Pattern(b)) => a.source == b.source,
            (Op::Is(a), Op::Is(b)) => a == b,
            (Op::IsDistinct(a), Op::IsDistinct(b)) => a == b,
            _ => false,
        }
    }
}

/// A pattern, compiled once into an automaton that matches in time linear in the text (for a
/// pattern of bounded size): a LIKE is translated into one, and a regular expression is never
/// run by backtracking.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The operator and pattern as the subscriber wrote them (`ilike:%a%`).
    source: String,
    regex: regex_automata::meta::Regex,
}

impl Pattern {
    /// A `like` (`ilike` with `insensitive`) pattern: `%` (or PostgREST's `*`) any run of
    /// characters, `_` exactly one, `\` makes the next character itself.
    fn like(pattern: &str, insensitive: bool) -> Result<Pattern, String> {
        let mut re = String::from(r"(?s)\A");
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            match c {
                // Any run of bytes: in UTF-8 text, what follows can only begin at a character.
                '%' | '*' => re.push_str("(?-u:.)*"),
                '_' => re.push('.'),
                '\\' => re.push_str(&regex::escape(&chars.next().map(String::from).unwrap_or_default())),
                c => re.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
            }
        }
        re.push_str(r"\z");
        let op = if insensitive { "ilike" } else { "like" };
        Pattern::compile(format!("{op}:{pattern}"), pattern, &re, insensitive)
    }

    /// A `match` (`imatch` with `insensitive`) regular expression, found anywhere in the text.
    fn regex(pattern: &str, insensitive: bool) -> Result<Pattern, String> {
        let op = if insensitive { "imatch" } else { "match" };
        Pattern::compile(format!("{op}:{pattern}"), pattern, pattern, insensitive)
    }

    fn compile(source: String, pattern: &str, re: &str, insensitive: bool) -> Result<Pattern, String> {
        if pattern.len() > MAX_PATTERN {
            return Err(format!("pattern longer than {MAX_PATTERN} bytes"));
        }
        let regex = regex_automata::meta::Builder::new()
            .configure(
                regex_automata::meta::Config::new()
                    .nfa_size_limit(Some(PATTERN_LIMIT))
                    .onepass_size_limit(Some(PATTERN_LIMIT))
                    .dfa_size_limit(Some(PATTERN_LIMIT))
                    .hybrid_cache_capacity(PATTERN_CACHE)
                    // No backtracking: a pattern of bounded size matches in linear time.
                    .backtrack(false),
            )
            .syntax(regex_automata::util::syntax::Config::new().case_insensitive(insensitive).utf8(false))
            .build(re)
            .map_err(|e| match e.size_limit() {
                Some(_) => format!("pattern too complex: {pattern:?}"),
                None => format!("invalid pattern: {pattern:?}"),
            })?;
        Ok(Pattern { source, regex })
    }

    /// The memory it may hold: its automaton and its lazy DFA's cache.
    pub fn cost(&self) -> usize {
        self.regex.memory_usage() + PATTERN_CACHE
    }

    fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `eq`.
    Eq,
    /// `neq`.
    Neq,
    /// `lt`.
    Lt,
    /// `lte`.
    Lte,
    /// `gt`.
    Gt,
    /// `gte`.
    Gte,
}

/// What `is.` tests for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsValue {
    /// `null`.
    Null,
    /// `not_null`.
    NotNull,
    /// `true`.
    True,
    /// `false`.
    False,
    /// `unknown` (a NULL boolean).
    Unknown,
}

impl Filter {
    /// Parses a binding's `filter` (empty: no condition). The message is what the subscriber
    /// is told.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut conditions = Vec::new();
        for part in split_top(text, ',').into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            conditions.push(condition(part)?);
        }
        Ok(Filter(conditions))
    }

    /// Whether a condition tests a pattern: a filter that may take time in proportion to the
    /// text it is tested on, matched apart from the others.
    pub fn has_pattern(&self) -> bool {
        self.0.iter().any(|c| matches!(c.op, Op::Pattern(_)))
    }

    /// The memory its patterns may hold, for a connection's budget.
    pub fn cost(&self) -> usize {
        self.0
            .iter()
            .map(|c| match &c.op {
                Op::Pattern(p) => p.cost(),
                _ => 0,
            })
            .sum()
    }

    /// The columns its conditions read.
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|c| c.column.as_str())
    }

    /// Whether `record` passes every condition.
    pub fn matches(&self, record: &Map<String, Value>) -> bool {
        self.0.iter().all(|c| c.matches(record.get(&c.column).unwrap_or(&Value::Null)))
    }
}

impl Condition {
    /// Whether `value` (a column's JSON) passes; SQL's three-valued logic makes a NULL fail
    /// both a test and its negation, except for `is` and `isdistinct`.
    fn matches(&self, value: &Value) -> bool {
        let held = match (&self.op, value) {
            (Op::Is(is), v) => Some(match is {
                IsValue::Null | IsValue::Unknown => v.is_null(),
                IsValue::NotNull => !v.is_null(),
                IsValue::True => v == &Value::Bool(true),
                IsValue::False => v == &Value::Bool(false),
            }),
            (Op::IsDistinct(want), v) => {
                Some(v.is_null() || compare(v, want) != Some(std::cmp::Ordering::Equal))
            }
            (_, Value::Null) => None,
            (Op::Compare(cmp, want), v) => compare(v, want).map(|o| match cmp {
                Cmp::Eq => o.is_eq(),
                Cmp::Neq => o.is_ne(),
                Cmp::Lt => o.is_lt(),
                Cmp::Lte => o.is_le(),
                Cmp::Gt => o.is_gt(),
                Cmp::Gte => o.is_ge(),
            }),
            (Op::In(list), v) => Some(list.iter().any(|w| compare(v, w) == Some(std::cmp::Ordering::Equal))),
            (Op::Pattern(p), v) => Some(p.is_match(&as_text(v))),
        };
        match held {
            Some(h) => h != self.negated,
            None => false,
        }
    }
}

fn condition(part: &str) -> Result<Condition, String> {
    let bad = || format!("Error parsing `filter` params: {part:?}");
    let (column, rest) = part.split_once('=').ok_or_else(bad)?;
    let (negated, rest) = match rest.strip_prefix("not.") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let (op, value) = rest.split_once('.').ok_or_else(bad)?;
    if column.is_empty() {
        return Err(bad());
    }
    let op = match op {
        "eq" => Op::Compare(Cmp::Eq, unquote(value)),
        "neq" => Op::Compare(Cmp::Neq, unquote(value)),
        "lt" => Op::Compare(Cmp::Lt, unquote(value)),
        "lte" => Op::Compare(Cmp::Lte, unquote(value)),
        "gt" => Op::Compare(Cmp::Gt, unquote(value)),
        "gte" => Op::Compare(Cmp::Gte, unquote(value)),
        "in" => {
            let inner = value
                .strip_prefix('(')
                .and_then(|v| v.strip_suffix(')'))
                .ok_or_else(|| "`in` filter value must be wrapped by parentheses".to_owned())?;
            let values: Vec<String> = split_top(inner, ',').into_iter().map(|v| unquote(v.trim())).collect();
            if values.len() > MAX_IN_VALUES {
                return Err(format!("too many values for `in` filter. Maximum {MAX_IN_VALUES}"));
            }
            Op::In(values)
        }
        "like" | "ilike" => Op::Pattern(Pattern::like(&unquote(value), op == "ilike")?),
        "match" | "imatch" => Op::Pattern(Pattern::regex(&unquote(value), op == "imatch")?),
        "is" => Op::Is(match value.to_ascii_lowercase().as_str() {
            "null" => IsValue::Null,
            "not_null" => IsValue::NotNull,
            "true" => IsValue::True,
            "false" => IsValue::False,
            "unknown" => IsValue::Unknown,
            _ => {
                return Err(format!(
                    "`is` filter value must be null, not_null, true, false or unknown: {part:?}"
                ))
            }
        }),
        "isdistinct" => Op::IsDistinct(unquote(value)),
        _ => return Err(bad()),
    };
    Ok(Condition { column: column.trim().to_owned(), negated, op })
}

/// Splits `text` at `sep` outside double quotes and parentheses.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let (mut parts, mut start, mut depth, mut quoted, mut escaped) = (Vec::new(), 0, 0i32, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            c if c == sep && !quoted && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// A value without PostgREST's double quotes (and their backslash escapes).
fn unquote(v: &str) -> String {
    match v.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => out.extend(chars.next()),
                    c => out.push(c),
                }
            }
            out
        }
        None => v.to_owned(),
    }
}

/// A column value compared with a filter's text: numbers as numbers, booleans as PostgreSQL
/// reads them, anything else by its text. `None` where they cannot be compared (text that is
/// no number against a number).
pub fn compare(value: &Value, want: &str) -> Option<std::cmp::Ordering> {
    match value {
        Value::Null => None,
        Value::Number(n) => {
            if let (Some(a), Ok(b)) = (n.as_i64(), want.trim().parse::<i64>()) {
                return Some(a.cmp(&b));
            }
            let b: f64 = want.trim().parse().ok()?;
            n.as_f64()?.partial_cmp(&b)
        }
        Value::Bool(a) => {
            let b = match want.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "y" | "yes" | "on" | "1" => true,
                "f" | "false" | "n" | "no" | "off" | "0" => false,
                _ => return None,
            };
            Some(a.cmp(&b))
        }
        Value::String(s) => Some(s.as_str().cmp(want)),
        other => Some(other.to_string().as_str().cmp(want)),
    }
}

fn as_text(v: &Value) -> std::borrow::Cow<'_, str> {
    match v {
        Value::String(s) => s.into(),
        other => other.to_string().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn passes(filter: &str, record: Value) -> bool {
        Filter::parse(filter).unwrap().matches(record.as_object().unwrap())
    }

    #[test]
    fn comparisons_follow_the_column_type() {
        assert!(passes("id=eq.5", json!({"id": 5})));
        assert!(!passes("id=eq.5", json!({"id": 50})));
        assert!(passes("id=gt.9", json!({"id": 10})));
        assert!(passes("price=lte.2.5", json!({"price": 2.5})));
        assert!(passes("name=lt.b", json!({"name": "abc"})));
        assert!(passes("done=eq.true", json!({"done": true})));
        assert!(passes("done=neq.t", json!({"done": false})));
        assert!(passes("id=in.(1,2,3)", json!({"id": 2})));
        assert!(!passes("id=in.(1,2,3)", json!({"id": 4})));
        assert!(passes(r#"name=in.("a,b",c)"#, json!({"name": "a,b"})));
        assert!(passes(r#"name=eq."say \"hi\"""#, json!({"name": "say \"hi\""})));
    }

    #[test]
    fn a_null_matches_no_test_nor_its_negation() {
        assert!(!passes("id=eq.1", json!({"id": null})));
        assert!(!passes("id=not.eq.1", json!({"id": null})));
        assert!(!passes("id=neq.1", json!({})));
        assert!(passes("id=is.null", json!({"id": null})));
        assert!(passes("id=not.is.null", json!({"id": 3})));
        assert!(passes("id=isdistinct.1", json!({"id": null})));
        assert!(!passes("id=isdistinct.1", json!({"id": 1})));
    }

    #[test]
    fn several_conditions_all_hold() {
        assert!(passes("id=gt.0,id=lt.100", json!({"id": 50})));
        assert!(!passes("id=gt.0,id=lt.100", json!({"id": 500})));
        assert!(passes("status=not.in.(draft,archived)", json!({"status": "live"})));
        assert!(!passes("status=not.in.(draft,archived)", json!({"status": "draft"})));
    }

    #[test]
    fn patterns() {
        assert!(passes("title=like.%foo%", json!({"title": "a foo b"})));
        assert!(passes("title=like.*foo*", json!({"title": "foo"})));
        assert!(!passes("title=like.foo_", json!({"title": "foo"})));
        assert!(passes("title=ilike.FOO%", json!({"title": "foobar"})));
        assert!(passes("title=match.^a.c$", json!({"title": "abc"})));
        assert!(passes("title=imatch.^A", json!({"title": "abc"})));
        assert!(passes(r"title=like.100\%", json!({"title": "100%"})));
        assert!(!passes(r"title=like.100\%", json!({"title": "1000"})));
        assert!(passes("title=like.a.c", json!({"title": "a.c"})));
        assert!(!passes("title=like.a.c", json!({"title": "abc"})));
        assert!(passes("title=like.a_c", json!({"title": "a\nc"})));
        assert!(passes("title=ilike.ÉTÉ", json!({"title": "été"})));
    }

    #[test]
    fn patterns_are_bounded_and_match_in_linear_time() {
        let long = format!("title=like.{}", "a".repeat(MAX_PATTERN + 1));
        assert_eq!(Filter::parse(&long).unwrap_err(), format!("pattern longer than {MAX_PATTERN} bytes"));
        let wide = format!("%a{}b", "_".repeat(400));
        assert_eq!(
            Filter::parse(&format!("title=like.{wide}")).unwrap_err(),
            format!("pattern too complex: {wide:?}")
        );
        // A pattern a backtracking matcher takes quadratic (or exponential) time over.
        // An `a` every 101 characters, `b` between: never a `b` 101 after an `a`.
        let text = format!("a{}", "b".repeat(100)).repeat(2000);
        let record = json!({"title": text});
        let started = std::time::Instant::now();
        for filter in [
            format!("title=like.%{}c", "a%".repeat(200)),
            format!("title=like.%a{}b", "_".repeat(100)),
            "title=match.(a*)*c".to_owned(),
        ] {
            assert!(!passes(&filter, record.clone()), "{filter}");
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[test]
    fn bad_filters_say_why() {
        assert_eq!(Filter::parse("foo").unwrap_err(), r#"Error parsing `filter` params: "foo""#);
        assert_eq!(
            Filter::parse("id=bogus.1").unwrap_err(),
            r#"Error parsing `filter` params: "id=bogus.1""#
        );
        assert_eq!(
            Filter::parse("id=in.1,2").unwrap_err(),
            "`in` filter value must be wrapped by parentheses"
        );
        let many = format!("id=in.({})", (0..101).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        assert!(Filter::parse(&many).unwrap_err().contains("Maximum 100"));
        assert!(Filter::parse("").unwrap().0.is_empty());
    }
}
