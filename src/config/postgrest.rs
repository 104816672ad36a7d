//! PostgREST's own configuration, read as it is so a deployment switches by changing the binary:
//! its file syntax (configurator's: `key = value`, `#` comments, double-quoted strings with
//! escapes and `$(NAME)` interpolation, `true`/`false`/`on`/`off`, numbers, `[lists]`,
//! `group { ... }`) and its `PGRST_*` environment variables. Both become keys of the same table
//! rowgate's TOML file is read into; PostgREST's options rowgate lacks are reported, not fatal.

use std::collections::BTreeMap;

use super::ServeArgs;

/// A value as the file writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A double-quoted string (escapes and interpolations done), or an environment variable.
    Text(String),
    /// `true`, `false`, `on`, `off`.
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// `[a, b]`.
    List(Vec<Value>),
}

/// What PostgREST's configuration gave: the keys rowgate reads, `app.settings.*`, and the keys it
/// does not know.
#[derive(Debug, Default)]
pub struct Read {
    /// Keys and values, as rowgate's TOML file would hold them.
    pub table: toml::Table,
    /// `app.settings.<name>` → value, applied to every database session.
    pub app_settings: BTreeMap<String, String>,
    /// PostgREST options rowgate has no use for (or does not have yet).
    pub ignored: Vec<String>,
}

/// PostgREST's older names for some options.
const ALIASES: [(&str, &str); 7] = [
    ("max-rows", "db-max-rows"),
    ("role-claim-key", "jwt-role-claim-key"),
    ("secret-is-base64", "jwt-secret-is-base64"),
    ("db-schema", "db-schemas"),
    ("pre-request", "db-pre-request"),
    ("root-spec", "db-root-spec"),
    ("db-pool-max-idletime", "db-pool-timeout"),
];

/// Parses a PostgREST configuration file; `env` looks up what `$(NAME)` names when no earlier
/// key does.
pub fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Vec<(String, Value)>, String> {
    let mut p = Parser { chars: text.chars().collect(), at: 0, line: 1 };
    let mut pairs: Vec<(String, Value)> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    loop {
        p.skip_space();
        let Some(c) = p.peek() else { break };
        if c == '}' {
            if groups.pop().is_none() {
                return Err(p.error("unexpected '}'"));
            }
            p.at += 1;
            continue;
        }
        let name = p.key()?;
        if name == "import" {
            return Err(p.error("`import` is not supported: put the options in one file"));
        }
        p.skip_blank();
        let prefix: String = groups.iter().map(|g| format!("{g}.")).collect();
        match p.peek() {
            Some('{') => {
                p.at += 1;
                groups.push(name);
            }
            Some('=') => {
                p.at += 1;
                p.skip_blank();
                let value = p.value(&|name: &str| lookup(&pairs, &groups, name).or_else(|| env(name)))?;
                pairs.push((format!("{prefix}{name}"), value));
            }
            _ => return Err(p.error(&format!("expected '=' or '{{' after '{name}'"))),
        }
    }
    if !groups.is_empty() {
        return Err(p.error("a group is not closed"));
    }
    Ok(pairs)
}

/// A key defined earlier, looked up in the current group first, then outward.
fn lookup(pairs: &[(String, Value)], groups: &[String], name: &str) -> Option<String> {
    (0..=groups.len()).rev().find_map(|depth| {
        let prefix: String = groups[..depth].iter().map(|g| format!("{g}.")).collect();
        let key = format!("{prefix}{name}");
        pairs.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| text_of(v))
    })
}

/// A value as text: what interpolation inserts and what a text option receives.
fn text_of(value: &Value) -> String {
    match value {
        Value::Text(t) | Value::Number(t) => t.clone(),
        Value::Bool(b) => b.to_string(),
        Value::List(items) => items.iter().map(text_of).collect::<Vec<_>>().join(", "),
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    line: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn error(&self, what: &str) -> String {
        format!("line {}: {what}", self.line)
    }

    /// Whitespace, line ends and comments.
    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                '\n' => {
                    self.line += 1;
                    self.at += 1;
                }
                c if c.is_whitespace() => self.at += 1,
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// Spaces and tabs within a line.
    fn skip_blank(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.at += 1;
        }
    }

    /// `name` or `dotted.name`: a letter, then letters, digits, `_` and `-`.
    fn key(&mut self) -> Result<String, String> {
        let start = self.at;
        loop {
            if !self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                return Err(self.error("expected an option name"));
            }
            while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                self.at += 1;
            }
            if self.peek() == Some('.') {
                self.at += 1;
            } else {
                break;
            }
        }
        Ok(self.chars[start..self.at].iter().collect())
    }

    fn value(&mut self, interpolate: &dyn Fn(&str) -> Option<String>) -> Result<Value, String> {
        match self.peek() {
            Some('"') => self.string(interpolate).map(Value::Text),
            Some('[') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    if self.peek() == Some(']') {
                        self.at += 1;
                        break;
                    }
                    items.push(self.value(interpolate)?);
                    self.skip_space();
                    match self.peek() {
                        Some(',') => self.at += 1,
                        Some(']') => {}
                        _ => return Err(self.error("expected ',' or ']' in a list")),
                    }
                }
                Ok(Value::List(items))
            }
            Some('\'') => Err(self.error("strings are written in double quotes")),
            _ => {
                let start = self.at;
                while self.peek().is_some_and(|c| !c.is_whitespace() && c != ',' && c != ']' && c != '#') {
                    self.at += 1;
                }
                let word: String = self.chars[start..self.at].iter().collect();
                match word.as_str() {
                    "true" | "on" => Ok(Value::Bool(true)),
                    "false" | "off" => Ok(Value::Bool(false)),
                    w if !w.is_empty() && w.parse::<f64>().is_ok() => Ok(Value::Number(word)),
                    "" => Err(self.error("expected a value")),
                    _ => {
                        Err(self
                            .error(&format!("'{word}' is no value: strings are written in double quotes")))
                    }
                }
            }
        }
    }

    /// A double-quoted string: `\n \t \r \" \\ \uXXXX`, `$(NAME)` and `$$`.
    fn string(&mut self, interpolate: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("a string is not closed"));
            };
            self.at += 1;
            match c {
                '"' => return Ok(out),
                '\n' => return Err(self.error("a string is not closed on its line")),
                '\\' => {
                    let e = self.peek().ok_or_else(|| self.error("a string is not closed"))?;
                    self.at += 1;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        'u' => out.push(self.unicode()?),
                        other => return Err(self.error(&format!("unknown escape '\\{other}'"))),
                    }
                }
                '$' if self.peek() == Some('$') => {
                    self.at += 1;
                    out.push('$');
                }
                '$' if self.peek() == Some('(') => {
                    self.at += 1;
                    let start = self.at;
                    while self.peek().is_some_and(|c| c != ')' && c != '"' && c != '\n') {
                        self.at += 1;
                    }
                    if self.peek() != Some(')') {
                        return Err(self.error("'$(' is not closed"));
                    }
                    let name: String = self.chars[start..self.at].iter().collect();
                    self.at += 1;
                    let value = interpolate(&name)
                        .ok_or_else(|| self.error(&format!("no such variable: '{name}'")))?;
                    out.push_str(&value);
                }
                c => out.push(c),
            }
        }
    }

    /// The four hex digits of `\uXXXX` (and the low half of a surrogate pair after them).
    fn unicode(&mut self) -> Result<char, String> {
        let hex = |p: &mut Parser| -> Result<u32, String> {
            let digits: String = p.chars.get(p.at..p.at + 4).map(|d| d.iter().collect()).unwrap_or_default();
            p.at += 4;
            u32::from_str_radix(&digits, 16).map_err(|_| p.error("\\u needs four hex digits"))
        };
        let high = hex(self)?;
        let code = if (0xD800..0xDC00).contains(&high)
            && self.chars.get(self.at..self.at + 2) == Some(&['\\', 'u'])
        {
            self.at += 2;
            let low = hex(self)?;
            0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF)
        } else {
            high
        };
        char::from_u32(code).ok_or_else(|| self.error("\\u names no character"))
    }
}

/// The `PGRST_*` variables among `vars` as PostgREST reads them: `PGRST_DB_URI` is `db-uri`,
/// `PGRST_APP_SETTINGS_<NAME>` is `app.settings.<NAME>`.
pub fn from_env(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, Value)> {
    let mut pairs: Vec<(String, Value)> = vars
        .filter_map(|(name, value)| {
            let rest = name.strip_prefix("PGRST_")?;
            let key = match rest.strip_prefix("APP_SETTINGS_") {
                Some("") => return None,
                Some(setting) => format!("app.settings.{setting}"),
                None => rest.to_ascii_lowercase().replace('_', "-"),
            };
            Some((key, Value::Text(value)))
        })
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs
}

/// Turns PostgREST's keys and values into rowgate's: aliases renamed, each value given the type
/// its option takes (PostgREST reads `"3000"` as a number and `"true"` as a boolean), an empty
/// string left unset as PostgREST leaves it.
pub fn read(pairs: Vec<(String, Value)>) -> Result<Read, String> {
    let mut read = Read::default();
    for (key, value) in pairs {
        let key = ALIASES.iter().find(|(old, _)| *old == key).map_or(key, |(_, new)| (*new).to_owned());
        if let Some(setting) = key.strip_prefix("app.settings.") {
            read.app_settings.insert(format!("app.settings.{setting}"), text_of(&value));
            continue;
        }
        if matches!(&value, Value::Text(t) if t.is_empty()) && key != "db-extra-search-path" {
            continue;
        }
        match typed(&key, &value)? {
            Some(v) => {
                read.table.insert(key, v);
            }
            None => read.ignored.push(key),
        }
    }
    Ok(read)
}

/// `value` as the TOML value `key` takes, or `None` when rowgate has no option `key`.
fn typed(key: &str, value: &Value) -> Result<Option<toml::Value>, String> {
    let text = text_of(value);
    let mut candidates = Vec::new();
    match value {
        Value::Bool(b) => candidates.push(toml::Value::Boolean(*b)),
        Value::Number(n) => {
            if let Ok(i) = n.parse::<i64>() {
                candidates.push(toml::Value::Integer(i));
            }
            if let Ok(f) = n.parse::<f64>() {
                candidates.push(toml::Value::Float(f));
            }
        }
        Value::Text(t) => {
            // PostgREST's booleans from text: the letters, title-cased, or a number above 0.
            let letters: String = t.chars().filter(char::is_ascii_alphabetic).collect();
            match letters.to_ascii_lowercase().as_str() {
                "true" => candidates.push(toml::Value::Boolean(true)),
                "false" => candidates.push(toml::Value::Boolean(false)),
                _ => {}
            }
            if let Ok(i) = t.trim().parse::<i64>() {
                candidates.push(toml::Value::Integer(i));
                candidates.push(toml::Value::Boolean(i > 0));
            }
        }
        Value::List(_) => {}
    }
    candidates.push(toml::Value::String(text));
    let mut refusal = None;
    for candidate in candidates {
        let mut one = toml::Table::new();
        one.insert(key.to_owned(), candidate.clone());
        match ServeArgs::from_table(one) {
            Ok(_) => return Ok(Some(candidate)),
            Err(e) if e.to_string().contains("unknown field") => return Ok(None),
            Err(e) => refusal = Some(e.to_string()),
        }
    }
    Err(format!("{key}: {}", refusal.unwrap_or_default().replace('\n', " ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_postgrest_file_reads_as_postgrest_reads_it() {
        let text = r#"
            # PostgREST's tutorial file, more or less
            db-uri = "postgres://authenticator:$(PGPASS)@localhost:5432/app"
            db-schemas = "api, api_v2"   # two schemas
            db-anon-role = "web_anon"
            server-port = 3001
            db-pool = "20"
            db-plan-enabled = on
            jwt-secret = "a \"quoted\" $$ secret \u00e9"
            jwt-role-claim-key = "$$.role"
            max-rows = 100
            app.settings.jwt_exp = 3600
            app.settings.name = "$(db-anon-role)"
            server-trace-header = ""
            log-query = "main-query"
            openapi { mode = "disabled" }
        "#;
        let env = |name: &str| (name == "PGPASS").then(|| "s3cret".to_owned());
        let read = read(parse(text, env).unwrap()).unwrap();
        let table = toml::Value::Table(read.table);
        assert_eq!(table["db-uri"].as_str(), Some("postgres://authenticator:s3cret@localhost:5432/app"));
        assert_eq!(table["db-schemas"].as_str(), Some("api, api_v2"));
        assert_eq!(table["server-port"].as_integer(), Some(3001));
        assert_eq!(table["db-pool"].as_integer(), Some(20));
        assert_eq!(table["db-plan-enabled"].as_bool(), Some(true));
        assert_eq!(table["jwt-secret"].as_str(), Some("a \"quoted\" $ secret é"));
        assert_eq!(table["jwt-role-claim-key"].as_str(), Some("$.role"));
        assert_eq!(table["db-max-rows"].as_integer(), Some(100));
        assert_eq!(table.get("server-trace-header"), None);
        assert_eq!(
            read.app_settings.into_iter().collect::<Vec<_>>(),
            [("app.settings.jwt_exp".into(), "3600".into()), ("app.settings.name".into(), "web_anon".into())]
        );
        assert_eq!(read.ignored, ["log-query", "openapi.mode"]);
    }

    #[test]
    fn mistakes_name_their_line() {
        assert_eq!(
            parse("db-uri = 'x'", no_env).unwrap_err(),
            "line 1: strings are written in double quotes"
        );
        assert_eq!(
            parse("\n\ndb-uri = \"$(NOPE)\"", no_env).unwrap_err(),
            "line 3: no such variable: 'NOPE'"
        );
        assert_eq!(parse("db-pool 3", no_env).unwrap_err(), "line 1: expected '=' or '{' after 'db-pool'");
        assert!(read(parse("db-pool = \"many\"", no_env).unwrap()).unwrap_err().starts_with("db-pool: "));
    }

    #[test]
    fn pgrst_variables_are_postgrest_keys() {
        let vars = [
            ("PGRST_DB_URI", "postgres://x"),
            ("PGRST_SERVER_PORT", "3002"),
            ("PGRST_DB_AGGREGATES_ENABLED", "true"),
            ("PGRST_APP_SETTINGS_MY_VAR", "v"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let read = read(from_env(vars.into_iter())).unwrap();
        let table = toml::Value::Table(read.table);
        assert_eq!(table["db-uri"].as_str(), Some("postgres://x"));
        assert_eq!(table["server-port"].as_integer(), Some(3002));
        assert_eq!(table["db-aggregates-enabled"].as_bool(), Some(true));
        assert_eq!(read.app_settings["app.settings.MY_VAR"], "v");
    }
}
