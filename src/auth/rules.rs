//! Access rules for the SQLite backend, which has no roles or row-level security: a TOML file
//! that says, per table (or view) and operation, which callers may do it.
//!
//! ```toml
//! [posts]
//! select = { anon = "true", authenticated = "true" }
//! ```
//!
//! A caller is `anon` (no credentials: the `db-anon-role`), `authenticated` (any verified
//! token) or the role its token names. A rule's value is the condition on the rows; only
//! `"true"` (every row) is understood so far — a filter expression is refused when the file is
//! loaded, never ignored. No rule is no access: the request fails as PostgreSQL's
//! `permission denied` does under PostgREST (401 for the anonymous caller, 403 otherwise).

use std::collections::HashMap;

use http::StatusCode;

use crate::auth::Principal;
use crate::error::Error;

/// The operations a rule can allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Reading (GET, HEAD; embedding reads the embedded table too).
    Select,
}

/// The parsed rules file.
#[derive(Debug, Default)]
pub struct Rules {
    /// (table, operation) → the callers allowed.
    allowed: HashMap<(String, Operation), Vec<String>>,
}

/// Why a rules file was refused.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Not readable.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// Not TOML of the expected shape.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl Rules {
    /// Reads a rules file.
    pub fn load(path: &std::path::Path) -> Result<Rules, RulesError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| RulesError::Read { path: path.display().to_string(), error })?;
        Rules::parse(&text)
            .map_err(|message| RulesError::Invalid { path: path.display().to_string(), message })
    }

    /// Parses the rules file's text.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| e.message().to_owned())?;
        let mut rules = Rules::default();
        for (table, ops) in doc {
            let toml::Value::Table(ops) = ops else {
                return Err(format!("[{table}] must be a table of operations"));
            };
            for (op, callers) in ops {
                let operation = match op.as_str() {
                    "select" => Operation::Select,
                    "insert" | "update" | "delete" => {
                        return Err(format!(
                            "{table}.{op}: writes are not supported on the SQLite backend yet"
                        ))
                    }
                    other => return Err(format!("{table}.{other}: unknown operation (select)")),
                };
                let toml::Value::Table(callers) = callers else {
                    return Err(format!("{table}.{op} must map callers to conditions"));
                };
                let mut allowed = Vec::new();
                for (caller, condition) in callers {
                    match condition.as_str() {
                        Some("true") => allowed.push(caller),
                        Some(other) => {
                            return Err(format!(
                                "{table}.{op}.{caller} = {other:?}: only \"true\" is supported so far \
                                 (row filters are not implemented yet)"
                            ))
                        }
                        None => return Err(format!("{table}.{op}.{caller} must be a string")),
                    }
                }
                rules.allowed.insert((table.clone(), operation), allowed);
            }
        }
        Ok(rules)
    }

    /// Whether `principal` may do `operation` on `table`.
    pub fn allows(&self, principal: &Principal, table: &str, operation: Operation) -> bool {
        self.allowed.get(&(table.to_owned(), operation)).is_some_and(|callers| {
            callers.iter().any(|c| match c.as_str() {
                "anon" => principal.anonymous,
                "authenticated" => !principal.anonymous,
                role => !principal.anonymous && *principal.role == *role,
            })
        })
    }

    /// Ok if `principal` may do `operation` on every table of `tables`; otherwise PostgreSQL's
    /// `permission denied` for the first that it may not.
    pub fn check<'t>(
        &self,
        principal: &Principal,
        tables: impl IntoIterator<Item = &'t str>,
        operation: Operation,
    ) -> Result<(), Error> {
        for table in tables {
            if !self.allows(principal, table, operation) {
                let status =
                    if principal.anonymous { StatusCode::UNAUTHORIZED } else { StatusCode::FORBIDDEN };
                return Err(Error::Api {
                    status,
                    code: "42501",
                    message: format!("permission denied for table {table}"),
                    details: None,
                    hint: None,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn caller(role: &str, anonymous: bool) -> Principal {
        Principal { role: Arc::from(role), claims: Arc::from("{}"), anonymous }
    }

    #[test]
    fn callers_are_anon_authenticated_or_a_role_and_no_rule_is_no_access() {
        let rules = Rules::parse(
            "[posts]\nselect = { anon = \"true\" }\n[secrets]\nselect = { admin = \"true\" }\n[notes]\nselect = { authenticated = \"true\" }",
        )
        .unwrap();
        let anon = caller("anon", true);
        let admin = caller("admin", false);
        assert!(rules.allows(&anon, "posts", Operation::Select));
        assert!(!rules.allows(&admin, "posts", Operation::Select));
        assert!(rules.allows(&admin, "secrets", Operation::Select));
        assert!(!rules.allows(&anon, "secrets", Operation::Select));
        assert!(rules.allows(&admin, "notes", Operation::Select));
        assert!(!rules.allows(&anon, "notes", Operation::Select));
        assert!(!rules.allows(&admin, "other", Operation::Select));
    }

    #[test]
    fn what_is_not_understood_is_refused_not_ignored() {
        assert!(Rules::parse("[posts]\nselect = { anon = \"author=eq.@jwt.sub\" }").is_err());
        assert!(Rules::parse("[posts]\ninsert = { anon = \"true\" }").is_err());
        assert!(Rules::parse("[posts]\nupsert = { anon = \"true\" }").is_err());
        assert!(Rules::parse("[posts]\nselect = true").is_err());
    }
}
