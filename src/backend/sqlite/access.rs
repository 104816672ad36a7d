//! What the access rules let one caller do to a plan's tables: for each table it reads or
//! writes, the condition on the rows it may touch (`None`: every row), or permission denied for
//! the first table it may not touch at all. The rules' filters are planned exactly as a
//! request's, and the caller's claims are bound into them.

use rowgate_request::LogicOp;

use super::rules::{self, Access as Allowed, Operation, Rules};
use super::sql::RowRules;
use crate::auth::Principal;
use crate::config::Config;
use crate::error::Error;
use crate::plan::Condition;
use crate::schema::SchemaCache;

/// The rules as they apply to one caller in one schema.
pub struct Access<'a> {
    /// The rules in force when the request began.
    pub rules: std::sync::Arc<Rules>,
    /// The schema cache snapshot of the request.
    pub schema: &'a SchemaCache,
    /// The exposed schema the request runs in.
    pub schema_name: &'a str,
    /// The caller.
    pub principal: &'a Principal,
    /// The configuration (rule filters are planned as requests are).
    pub config: &'a Config,
}

impl Access<'_> {
    /// The read rules of `tables`: the condition of each table the caller may read only in
    /// part; permission denied for the first it may not read at all.
    pub fn read_rules(&self, tables: &[&str]) -> Result<RowRules, Error> {
        let mut read = RowRules::new();
        for table in tables {
            if !read.contains_key(*table) {
                read.insert((*table).to_owned(), self.rule(table, Operation::Select)?);
            }
        }
        Ok(read)
    }

    /// The rows of `table` the caller's rule for `op` allows: `None` for every row, the
    /// condition otherwise (the OR of the entries that apply, `@jwt` values bound); permission
    /// denied when no entry applies.
    pub fn rule(&self, table: &str, op: Operation) -> Result<Option<Condition>, Error> {
        match self.rules.access(self.principal, table, op) {
            Allowed::Denied => Err(self.rules.refusal(self.principal, table, op)),
            Allowed::All => Ok(None),
            Allowed::Rows(filters) => {
                let relation = self
                    .schema
                    .relation(self.schema_name, table)
                    .ok_or_else(|| rules::denied(self.principal, table))?;
                let mut any = Vec::new();
                for query in &filters {
                    let mut all = crate::plan::row_filter(relation, self.schema, query, self.config)?;
                    if !rules::bind_claims(&mut all, &self.principal.claims) {
                        // A claim the entry names is missing: the entry allows no row.
                        continue;
                    }
                    any.push(Condition::Logic { negated: false, op: LogicOp::And, children: all });
                }
                Ok(Some(Condition::Logic { negated: false, op: LogicOp::Or, children: any }))
            }
        }
    }
}

/// Two rules that must both hold (`None`: every row).
pub fn both(a: Option<Condition>, b: Option<Condition>) -> Option<Condition> {
    match (a, b) {
        (Some(a), Some(b)) => {
            Some(Condition::Logic { negated: false, op: LogicOp::And, children: vec![a, b] })
        }
        (a, b) => a.or(b),
    }
}
