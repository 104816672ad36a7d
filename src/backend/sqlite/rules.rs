//! Access rules for the SQLite backend, which has no roles or row-level security: a TOML file
//! that says, per table (or view) and operation, which callers may do it.
//!
//! ```toml
//! [posts]
//! select = { anon = "true", authenticated = "true" }
//! ```
//!
//! A caller is `anon` (no credentials: the `db-anon-role`), `authenticated` (any verified
//! token), the role its token names, or `everyone` (all of them: a visitor and a signed-in user
//! alike, as PocketBase's empty rule; `anon` alone is the visitor only, as on Supabase). A
//! rule's value is the condition on the rows: `"true"`
//! for every row, or PostgREST filters as in a query string (`author=eq.@jwt.sub`,
//! `public=is.true&lang=eq.en`, `or=(public.is.true,author.eq.@jwt.sub)`), where `@jwt.<claim>`
//! is the caller's claim (a missing claim matches no row). Where several entries apply to a
//! caller, a row any of them allows is allowed. No rule is no access: the request fails as
//! PostgreSQL's `permission denied` does under PostgREST (401 for the anonymous caller, 403
//! otherwise).

use std::collections::HashMap;

use crate::auth::Principal;
use crate::error::{sqlstate, Error};

/// The operations a rule can allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Reading (GET, HEAD; embedding reads the embedded table too; a write's representation).
    Select,
    /// POST: the rule must hold for every new row.
    Insert,
    /// PATCH: only rows the rule holds for are updated, and it must hold for them after.
    Update,
    /// DELETE: only rows the rule holds for are deleted.
    Delete,
}

/// Which rows a rule allows.
#[derive(Debug, Clone)]
pub enum RowFilter {
    /// Every row.
    All,
    /// The rows these top-level filters and logic trees keep (parsed, not yet planned).
    Filters(Box<rowgate_request::QueryParams>),
}

/// The parsed rules file.
#[derive(Debug, Default, Clone)]
pub struct Rules {
    /// (table, operation) → the callers allowed, with the rows each may touch.
    allowed: HashMap<(String, Operation), Vec<(String, RowFilter)>>,
}

/// What a caller may touch of one table.
#[derive(Debug, Clone)]
pub enum Access {
    /// Nothing: permission denied.
    Denied,
    /// Every row.
    All,
    /// The rows any of these filters keeps.
    Rows(Vec<rowgate_request::QueryParams>),
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
                    "insert" => Operation::Insert,
                    "update" => Operation::Update,
                    "delete" => Operation::Delete,
                    other => {
                        return Err(format!(
                            "{table}.{other}: unknown operation (select, insert, update, delete)"
                        ))
                    }
                };
                let toml::Value::Table(callers) = callers else {
                    return Err(format!("{table}.{op} must map callers to conditions"));
                };
                let mut allowed = Vec::new();
                for (caller, condition) in callers {
                    let filter = match condition.as_str() {
                        Some(text) => row_filter(text).map_err(|e| format!("{table}.{op}.{caller}: {e}"))?,
                        None => return Err(format!("{table}.{op}.{caller} must be a string")),
                    };
                    allowed.push((caller, filter));
                }
                rules.allowed.insert((table.clone(), operation), allowed);
            }
        }
        Ok(rules)
    }

    /// What `principal` may touch of `table` by `operation`.
    pub fn access(&self, principal: &Principal, table: &str, operation: Operation) -> Access {
        // Supabase's service key bypasses row-level security; here, the rules.
        if !principal.anonymous && *principal.role == *crate::auth::SERVICE_ROLE {
            return Access::All;
        }
        let Some(callers) = self.allowed.get(&(table.to_owned(), operation)) else {
            return Access::Denied;
        };
        let mut rows = Vec::new();
        for (caller, filter) in callers {
            let applies = match caller.as_str() {
                "everyone" => true,
                "anon" => principal.anonymous,
                "authenticated" => !principal.anonymous,
                role => !principal.anonymous && *principal.role == *role,
            };
            match (applies, filter) {
                (false, _) => {}
                (true, RowFilter::All) => return Access::All,
                (true, RowFilter::Filters(f)) => rows.push((**f).clone()),
            }
        }
        if rows.is_empty() {
            Access::Denied
        } else {
            Access::Rows(rows)
        }
    }

    /// The claims the rules read (`@jwt.<claim>`), by name.
    pub fn claims(&self) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        for (_, filter) in self.allowed.values().flatten() {
            if let RowFilter::Filters(q) = filter {
                out.extend(claims_named(q));
            }
        }
        out
    }

    /// These rules with each PocketBase collection's access in place of the file's entries for
    /// its table: the collection's rules are the table's.
    pub fn with_collections(
        mut self,
        collections: &[(String, crate::backend::collections::TableAccess)],
    ) -> Rules {
        use crate::backend::collections::Access as Who;
        for (table, access) in collections {
            for (operation, who) in [
                (Operation::Select, &access.select),
                (Operation::Insert, &access.insert),
                (Operation::Update, &access.update),
                (Operation::Delete, &access.delete),
            ] {
                let key = (table.clone(), operation);
                let callers = match who {
                    Who::Nobody => Vec::new(),
                    Who::Everyone => vec![("everyone".to_owned(), RowFilter::All)],
                    // A caller a rule holds for no row of may still ask, and gets none (a list
                    // is empty, a new row refused by the rule), as where PostgreSQL's policies
                    // admit none of its rows: not a refusal to ask at all.
                    Who::Rows { visitor, signed_in } => [("anon", visitor), ("authenticated", signed_in)]
                        .into_iter()
                        .map(|(caller, rows)| (caller, rows.as_deref().unwrap_or(NO_ROW)))
                        .filter_map(|(caller, rows)| match row_filter(rows) {
                            Ok(filter) => Some((caller.to_owned(), filter)),
                            Err(e) => {
                                // Made by rowgate from a checked rule: none of its rows, not all.
                                tracing::error!(table, error = %e, "a collection's rule could not be read: it admits nobody");
                                None
                            }
                        })
                        .collect(),
                };
                match callers.is_empty() {
                    true => self.allowed.remove(&key),
                    false => self.allowed.insert(key, callers),
                };
            }
        }
        self
    }

    /// Whether `principal` may do `operation` on some rows of `table`.
    pub fn allows(&self, principal: &Principal, table: &str, operation: Operation) -> bool {
        !matches!(self.access(principal, table, operation), Access::Denied)
    }
}

impl Rules {
    /// The refusal of `principal`'s `operation` on `table`: [`denied`], with a hint where the
    /// table has a rule for visitors (`anon`) that a signed-in caller may have expected to cover
    /// them too.
    pub fn refusal(&self, principal: &Principal, table: &str, operation: Operation) -> Error {
        let for_visitors = self
            .allowed
            .get(&(table.to_owned(), operation))
            .is_some_and(|callers| callers.iter().any(|(caller, _)| caller == "anon"));
        match denied(principal, table) {
            Error::Database(mut db) if for_visitors && !principal.anonymous => {
                db.hint = Some(format!(
                    "The rule for anon covers visitors only; `everyone = ...` in [{table}] covers signed-in callers too"
                ));
                Error::Database(db)
            }
            e => e,
        }
    }
}

/// PostgreSQL's `permission denied` for `table`, as PostgREST answers it: 401 for the anonymous
/// caller, 403 otherwise.
pub fn denied(principal: &Principal, table: &str) -> Error {
    Error::sql(
        sqlstate::INSUFFICIENT_PRIVILEGE,
        format!("permission denied for table {table}"),
        principal.anonymous,
    )
}

/// Whether each condition of a collection's `access` reads as a rule (checked before it is
/// stored: one that did not would admit nobody).
pub fn check_access(access: &crate::backend::collections::TableAccess) -> Result<(), String> {
    use crate::backend::collections::Access as Who;
    for who in [&access.select, &access.insert, &access.update, &access.delete] {
        if let Who::Rows { visitor, signed_in } = who {
            for rows in [visitor, signed_in].into_iter().flatten() {
                row_filter(rows)?;
            }
        }
    }
    Ok(())
}

/// A condition no row of a collection (whose key is `id`) meets.
const NO_ROW: &str = "and=(id.is.null,id.not.is.null)";

/// A rule's condition: `"true"`, or filters.
fn row_filter(text: &str) -> Result<RowFilter, String> {
    match text {
        "true" => Ok(RowFilter::All),
        filters => Ok(RowFilter::Filters(Box::new(parse_filters(filters)?))),
    }
}

/// A rule's filters, parsed by the request parser as a query string of top-level filters and
/// logic trees; anything else (select, order, limit, embedded paths) is refused.
fn parse_filters(text: &str) -> Result<rowgate_request::QueryParams, String> {
    let request = rowgate_request::parse(rowgate_request::Method::Get, "/rule", text, &[])
        .map_err(|e| format!("{e}"))?;
    let q = request.query;
    let top_level = q.filters.iter().all(|(p, _)| p.is_empty()) && q.logic.iter().all(|(p, _)| p.is_empty());
    if !top_level
        || !q.order.is_empty()
        || !q.ranges.is_empty()
        || q.columns.is_some()
        || q.on_conflict.is_some()
    {
        return Err(format!("{text:?}: a rule may only hold filters on the table's own columns"));
    }
    if q.filters.is_empty() && q.logic.is_empty() {
        return Err(format!("{text:?}: no filter (write \"true\" for every row)"));
    }
    if let Some(f) = leaf_filters(&q).into_iter().find(|f| claim_as_pattern(f)) {
        return Err(format!(
            "{text:?}: {} takes a pattern, and a claim is not one (a caller could choose a value \
             that matches every row); compare claims with eq, neq, in or is.distinct",
            f.field.name
        ));
    }
    Ok(q)
}

/// Every filter of a rule: the top-level ones and those inside its logic trees.
fn leaf_filters(q: &rowgate_request::QueryParams) -> Vec<&rowgate_request::Filter> {
    let mut filters: Vec<&rowgate_request::Filter> = q.filters.iter().map(|(_, f)| f).collect();
    let mut trees: Vec<&rowgate_request::LogicTree> = q.logic.iter().map(|(_, t)| t).collect();
    while let Some(tree) = trees.pop() {
        match tree {
            rowgate_request::LogicTree::Expr { children, .. } => trees.extend(children),
            rowgate_request::LogicTree::Filter(f) => filters.push(f),
        }
    }
    filters
}

/// The claims a rule entry's filters name (`@jwt.<claim>`).
pub fn claims_named(q: &rowgate_request::QueryParams) -> std::collections::BTreeSet<String> {
    use rowgate_request::Operation as Op;
    let mut out = std::collections::BTreeSet::new();
    let mut note = |value: &str| {
        if let Some(name) = value.strip_prefix("@jwt.") {
            out.insert(name.to_owned());
        }
    };
    for f in leaf_filters(q) {
        match &f.operation {
            Op::Compare { value, .. } | Op::IsDistinct(value) => note(value),
            Op::In(items) => items.iter().for_each(|v| note(v)),
            _ => {}
        }
    }
    out
}

/// Whether a rule's filters read a claim (`@jwt.<claim>`): then callers of one role see
/// different rows.
pub fn reads_claims(q: &rowgate_request::QueryParams) -> bool {
    use rowgate_request::Operation as Op;
    leaf_filters(q).iter().any(|f| match &f.operation {
        Op::Compare { value, .. } | Op::IsDistinct(value) => value.starts_with("@jwt."),
        Op::In(items) => items.iter().any(|v| v.starts_with("@jwt.")),
        _ => false,
    })
}

/// Whether a filter would read a claim as a pattern (`like`, `ilike`, `match`, `imatch`).
fn claim_as_pattern(f: &rowgate_request::Filter) -> bool {
    use rowgate_request::{CompareOp, Operation as Op};
    matches!(
        &f.operation,
        Op::Compare { op: CompareOp::Like | CompareOp::Ilike | CompareOp::Match | CompareOp::Imatch, value, .. }
            if value.contains("@jwt.")
    )
}

/// Replaces `@jwt.<claim>` filter values by the caller's claims (`claims`, the token's JSON);
/// false when a claim they name is missing: the rule entry then keeps no row at all (replacing
/// only the filter that names it by "false" would turn into "true" under a `not.`).
#[must_use]
pub fn bind_claims(conditions: &mut [crate::plan::Condition], claims: &str) -> bool {
    let claims: serde_json::Map<String, serde_json::Value> = serde_json::from_str(claims).unwrap_or_default();
    let mut complete = true;
    for c in conditions {
        complete &= bind(c, &claims);
    }
    complete
}

fn bind(c: &mut crate::plan::Condition, claims: &serde_json::Map<String, serde_json::Value>) -> bool {
    use crate::plan::Condition;
    use rowgate_request::Operation as Op;
    let lookup = |v: &str| -> Option<Option<String>> {
        let name = v.strip_prefix("@jwt.")?;
        Some(claims.get(name).and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        }))
    };
    let mut missing = false;
    match c {
        Condition::Filter { filter, .. } => match &mut filter.operation {
            Op::Compare { value, .. } | Op::IsDistinct(value) => {
                if let Some(found) = lookup(value) {
                    match found {
                        Some(v) => *value = v,
                        None => missing = true,
                    }
                }
            }
            Op::In(items) => {
                for item in items.iter_mut() {
                    if let Some(found) = lookup(item) {
                        match found {
                            Some(v) => *item = v,
                            None => missing = true,
                        }
                    }
                }
            }
            Op::Is(_) | Op::Fts { .. } => {}
        },
        Condition::Logic { children, .. } => {
            for child in children {
                missing |= !bind(child, claims);
            }
        }
        Condition::Exists { .. } => {}
    }
    !missing
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
    fn everyone_covers_visitors_and_signed_in_callers_and_anon_alone_says_so_when_refused() {
        let rules =
            Rules::parse("[posts]\nselect = { everyone = \"true\" }\n[drafts]\nselect = { anon = \"true\" }")
                .unwrap();
        let (visitor, user) = (caller("anon", true), caller("authenticated", false));
        assert!(rules.allows(&visitor, "posts", Operation::Select));
        assert!(rules.allows(&user, "posts", Operation::Select));
        assert!(!rules.allows(&user, "drafts", Operation::Select));
        let Error::Database(refused) = rules.refusal(&user, "drafts", Operation::Select) else { panic!() };
        assert_eq!(
            refused.hint.as_deref(),
            Some("The rule for anon covers visitors only; `everyone = ...` in [drafts] covers signed-in callers too")
        );
        let Error::Database(refused) = rules.refusal(&user, "posts", Operation::Insert) else { panic!() };
        assert_eq!(refused.hint, None);
    }

    #[test]
    fn what_is_not_understood_is_refused_not_ignored() {
        assert!(Rules::parse("[posts]\nselect = { anon = \"author=eq.@jwt.sub\" }").is_ok());
        assert!(Rules::parse("[posts]\nselect = { anon = \"author=eq.1&order=id\" }").is_err());
        assert!(Rules::parse("[posts]\nselect = { anon = \"author=nope.1\" }").is_err());
        assert!(Rules::parse("[posts]\nselect = { anon = \"\" }").is_err());
        assert!(Rules::parse("[posts]\ninsert = { anon = \"true\" }").is_ok());
        assert!(Rules::parse("[posts]\nupsert = { anon = \"true\" }").is_err());
        assert!(Rules::parse("[posts]\nselect = true").is_err());
    }

    #[test]
    fn a_claim_is_never_read_as_a_pattern() {
        // A caller who chose the e-mail `%@%` would match every row.
        assert!(Rules::parse("[posts]\nselect = { authenticated = \"email=ilike.@jwt.email\" }").is_err());
        assert!(Rules::parse("[posts]\nselect = { authenticated = \"or=(a.like.@jwt.x,b.eq.1)\" }").is_err());
        assert!(Rules::parse("[posts]\nselect = { authenticated = \"email=eq.@jwt.email\" }").is_ok());
    }

    #[test]
    fn the_claims_the_rules_read_are_known() {
        let rules = Rules::parse(
            "[posts]\nselect = { authenticated = \"or=(owner.eq.@jwt.sub,team.in.(@jwt.team,x))\" }\n\
             [notes]\ndelete = { anon = \"true\", editor = \"owner=neq.@jwt.email\" }",
        )
        .unwrap();
        assert_eq!(rules.claims().into_iter().collect::<Vec<_>>(), ["email", "sub", "team"]);
    }

    #[test]
    fn an_entry_naming_a_missing_claim_keeps_no_row_even_under_not() {
        use crate::plan::Condition;
        use rowgate_request::{Field, Filter, LogicOp, Operation as Op};
        let filter = |value: &str| Condition::Filter {
            expr: crate::plan::Expr::Column("owner".into()),
            kind: crate::schema::ValueKind::Other,
            filter: Filter {
                field: Field { name: "owner".into(), json_path: Vec::new() },
                negated: false,
                operation: Op::Compare {
                    op: rowgate_request::CompareOp::Eq,
                    quantifier: None,
                    value: value.into(),
                },
            },
            parse: None,
        };
        // `not.or=(owner.eq.@jwt.sub,owner.eq.x)`: without `sub`, "false" for the one filter
        // would make the whole entry true for almost every row.
        let mut entry = vec![Condition::Logic {
            negated: true,
            op: LogicOp::Or,
            children: vec![filter("@jwt.sub"), filter("x")],
        }];
        assert!(!bind_claims(&mut entry, "{}"));
        let mut entry = vec![filter("@jwt.sub")];
        assert!(bind_claims(&mut entry, r#"{"sub": "alice"}"#));
        let Condition::Filter { filter, .. } = &entry[0] else { unreachable!() };
        assert!(matches!(&filter.operation, Op::Compare { value, .. } if value == "alice"));
    }
}
