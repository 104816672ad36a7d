//! Resource embedding: the relationship between a relation and the one `select` embeds — a
//! computed relationship, a foreign key either way, or a join table (many-to-many) — chosen as
//! PostgREST chooses it, and the embedded resource planned as a level of its own.

use std::sync::Arc;

use rowgate_request::{Embed, JoinType};

use super::select::Planner;
use super::{inner_joins, EmbedPlan, Expr, Junction, OutputColumn, RowWindow};
use crate::error::{code, Error};
use crate::schema::{ForeignKey, Function, FunctionResult, QualifiedName, Relation, ValueKind};

/// Embeds nest at most this deep.
const MAX_DEPTH: usize = 16;

/// A relationship an embed could use.
enum Candidate<'r> {
    /// A foreign key of the parent (to-one), or of the child (to-many).
    Direct { to_many: bool, fk: &'r ForeignKey },
    /// A join table whose primary key holds a foreign key to each side.
    Junction { table: &'r Arc<Relation>, to_parent: &'r ForeignKey, to_child: &'r ForeignKey },
    /// A function of the parent's row returning the embedded relation's rows.
    Computed { function: &'r Function },
}

impl Candidate<'_> {
    /// How PGRST201 names the candidate.
    fn name(&self) -> &str {
        match self {
            Candidate::Direct { fk, .. } => &fk.name,
            Candidate::Junction { table, .. } => &table.name.name,
            Candidate::Computed { function } => &function.name.name,
        }
    }
}

/// How the parent's rows reach the embedded ones.
struct Link {
    /// An array (one-to-many, many-to-many, a set-returning function) rather than an object.
    to_many: bool,
    /// (parent column, embedded or join-table column) pairs.
    join: Vec<(String, String)>,
    /// The join table of a many-to-many embed.
    through: Option<Junction>,
    /// The function of a computed relationship.
    computed: Option<QualifiedName>,
}

impl<'a> Planner<'a> {
    /// Plans an embedded resource found through a relationship between this relation and it.
    pub(super) fn embed(&self, embed: &Embed) -> Result<OutputColumn, Error> {
        if self.depth >= MAX_DEPTH {
            return Err(Error::api(
                code::UNSUPPORTED,
                "Nesting deeper than 16 levels in resource embedding is not supported by this version of rowgate yet",
            ));
        }
        let computed_child = self.types.computed(self.relation, &embed.name).and_then(|f| match &f.returns {
            FunctionResult::Composite(q) => self.types.relations.get(q),
            _ => None,
        });
        let child = match computed_child {
            Some(c) => c.clone(),
            None => self
                .types
                .relation(self.schema, &embed.name)
                .ok_or_else(|| self.no_relationship(embed))?
                .clone(),
        };
        let link = self.link(self.relationship(embed, &child)?, &child);
        let paths = self
            .paths
            .iter()
            .flat_map(|p| {
                [embed.alias.as_ref(), Some(&embed.name)].into_iter().flatten().map(move |key| {
                    let mut path = p.clone();
                    path.push(key.clone());
                    path
                })
            })
            .collect();
        let inner = Planner {
            relation: &child,
            types: self.types,
            schema: self.schema,
            depth: self.depth + 1,
            query: self.query,
            paths,
            label: None,
            aggregates: self.aggregates,
        };
        let window = inner
            .query
            .ranges
            .iter()
            .find(|(p, _)| inner.paths.contains(p))
            .map(|(_, lo)| RowWindow { offset: lo.offset.unwrap_or(0), limit: lo.limit })
            .unwrap_or(RowWindow { offset: 0, limit: None });
        // `rel()` selects nothing: it only filters, and is left out of the response.
        let columns = inner.columns(&embed.select)?;
        let (mut conditions, order) = inner.level(&columns)?;
        conditions.extend(inner_joins(&columns));
        let plan = EmbedPlan {
            relation: child.clone(),
            columns,
            join: link.join,
            to_many: link.to_many,
            depth: self.depth + 1,
            conditions,
            order,
            window,
            inner: embed.join == Some(JoinType::Inner),
            through: link.through,
            computed: link.computed,
        };
        Ok(OutputColumn {
            key: embed.alias.clone().unwrap_or_else(|| embed.name.clone()),
            expr: Expr::Embed(Box::new(plan)),
            kind: ValueKind::Json,
        })
    }

    /// The one relationship `embed` names between this relation and `child`: a computed
    /// relationship first, then direct foreign keys either way, and only without those join
    /// tables; PGRST200 for none, PGRST201 for several.
    fn relationship<'r>(&'r self, embed: &Embed, child: &'r Relation) -> Result<Candidate<'r>, Error> {
        let parent = &self.relation.name;
        let matches_hint = |fk: &ForeignKey| match &embed.hint {
            None => true,
            Some(h) => fk.name == *h || fk.columns.iter().any(|c| c == h),
        };
        let mut candidates: Vec<Candidate> = Vec::new();
        // A computed relationship (a function of the parent's row returning the embedded
        // relation's rows) takes precedence over foreign keys, as in PostgREST.
        if let Some(f) = self.types.computed(self.relation, &embed.name) {
            if matches!(&f.returns, FunctionResult::Composite(_)) {
                return Ok(Candidate::Computed { function: f });
            }
        }
        for fk in &self.relation.foreign_keys {
            if fk.target == child.name && matches_hint(fk) {
                candidates.push(Candidate::Direct { to_many: false, fk });
            }
        }
        for fk in &child.foreign_keys {
            let seen = candidates
                .iter()
                .any(|c| matches!(c, Candidate::Direct { fk: d, .. } if std::ptr::eq(*d, fk)));
            if fk.target == *parent && matches_hint(fk) && !seen {
                candidates.push(Candidate::Direct { to_many: true, fk });
            }
        }
        if candidates.is_empty() {
            candidates = self.junctions(embed, child);
        }
        match candidates.len() {
            0 => Err(self.no_relationship(embed)),
            1 => Ok(candidates.remove(0)),
            _ => {
                let names: Vec<&str> = candidates.iter().map(Candidate::name).collect();
                Err(Error::api(
                    code::AMBIGUOUS_EMBED,
                    format!(
                        "Could not embed because more than one relationship was found for '{}' and '{}'",
                        parent.name, embed.name
                    ),
                )
                .with_details(format!("Candidate relationships: {}", names.join(", ")))
                .with_hint(format!(
                    "Try changing '{}' to one of the relationships, e.g. '{}!{}'",
                    embed.name, embed.name, names[0]
                )))
            }
        }
    }

    /// The join tables of the schema whose primary key holds a foreign key to this relation and
    /// one to `child` (PostgREST's many-to-many), by name, as `embed`'s hint allows.
    fn junctions<'r>(&'r self, embed: &Embed, child: &'r Relation) -> Vec<Candidate<'r>> {
        let parent = &self.relation.name;
        let in_key =
            |table: &Relation, fk: &ForeignKey| fk.columns.iter().all(|c| table.primary_key.contains(c));
        let mut tables: Vec<&Arc<Relation>> =
            self.types.relations.values().filter(|r| r.name.schema == self.schema).collect();
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        let mut found = Vec::new();
        for table in tables {
            if embed.hint.as_ref().is_some_and(|h| *h != table.name.name) {
                continue;
            }
            for to_parent in table.foreign_keys.iter().filter(|fk| fk.target == *parent && in_key(table, fk))
            {
                for to_child in
                    table.foreign_keys.iter().filter(|fk| fk.target == child.name && in_key(table, fk))
                {
                    if !std::ptr::eq(to_parent, to_child) {
                        found.push(Candidate::Junction { table, to_parent, to_child });
                    }
                }
            }
        }
        found
    }

    /// How `chosen` joins this relation's rows to `child`'s.
    fn link(&self, chosen: Candidate<'_>, child: &Relation) -> Link {
        let pairs = |from: &[String], to: &[String]| from.iter().cloned().zip(to.iter().cloned()).collect();
        match chosen {
            Candidate::Computed { function } => Link {
                // `ROWS 1` on a set-returning function declares at most one row: to-one.
                to_many: function.returns_set && function.rows != 1.0,
                join: Vec::new(),
                through: None,
                computed: Some(function.name.clone()),
            },
            // The child references the parent: pairs of (parent column, child column). When the
            // referencing columns are unique in the child, there is at most one: one-to-one.
            Candidate::Direct { to_many: true, fk } => {
                let unique = |key: &Vec<String>| {
                    !key.is_empty()
                        && key.len() == fk.columns.len()
                        && key.iter().all(|k| fk.columns.contains(k))
                };
                let one_to_one = unique(&child.primary_key) || child.unique_keys.iter().any(unique);
                Link {
                    to_many: !one_to_one,
                    join: pairs(&fk.target_columns, &fk.columns),
                    through: None,
                    computed: None,
                }
            }
            Candidate::Direct { to_many: false, fk } => Link {
                to_many: false,
                join: pairs(&fk.columns, &fk.target_columns),
                through: None,
                computed: None,
            },
            Candidate::Junction { table, to_parent, to_child } => Link {
                to_many: true,
                // (parent column, join-table column)
                join: pairs(&to_parent.target_columns, &to_parent.columns),
                through: Some(Junction {
                    relation: table.clone(),
                    // (join-table column, child column)
                    to_child: pairs(&to_child.columns, &to_child.target_columns),
                }),
                computed: None,
            },
        }
    }

    /// PGRST200: no relationship between this relation and the one `embed` names.
    fn no_relationship(&self, embed: &Embed) -> Error {
        let parent = &self.relation.name.name;
        Error::api(
            code::NO_RELATIONSHIP,
            format!("Could not find a relationship between '{parent}' and '{}' in the schema cache", embed.name),
        )
        .with_details(format!(
            "Searched for a foreign key relationship between '{parent}' and '{}' in the schema '{}', but no matches were found.",
            embed.name, self.schema
        ))
    }
}
