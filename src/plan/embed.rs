//! Resource embedding: the relationship between a relation and the one `select` embeds — a
//! computed relationship, a foreign key either way, or a join table (many-to-many) — chosen as
//! PostgREST chooses it, and the embedded resource planned as a level of its own.

use std::sync::Arc;

use rowgate_request::{Embed, JoinType};

use super::select::Planner;
use super::{inner_joins, EmbedPlan, Expr, Junction, OutputColumn, RowWindow};
use crate::error::{code, Details, Error};
use crate::schema::{ForeignKey, Function, FunctionResult, QualifiedName, Relation, RelationKind, ValueKind};

/// Embeds nest at most this deep.
const MAX_DEPTH: usize = 16;

/// A relationship an embed could use, and the relation it reaches.
enum Candidate<'r> {
    /// A foreign key of the parent (`incoming: false`: to-one), or of the other relation
    /// referencing the parent (`incoming: true`: to-many unless its columns are unique there).
    Direct { incoming: bool, fk: &'r ForeignKey, other: &'r Arc<Relation> },
    /// A join table whose primary key holds a foreign key to each side.
    Junction {
        table: &'r Arc<Relation>,
        to_parent: &'r ForeignKey,
        to_child: &'r ForeignKey,
        other: &'r Arc<Relation>,
    },
    /// A function of the parent's row returning the embedded relation's rows.
    Computed { function: &'r Function, other: &'r Arc<Relation> },
}

impl Candidate<'_> {
    /// The relation the embed reaches.
    fn other(&self) -> &Arc<Relation> {
        match self {
            Candidate::Direct { other, .. }
            | Candidate::Junction { other, .. }
            | Candidate::Computed { other, .. } => other,
        }
    }

    /// A direct relationship's column pairs (parent column, other relation's column).
    fn pairs(&self) -> Vec<(&str, &str)> {
        match self {
            Candidate::Direct { incoming: false, fk, .. } => {
                fk.columns.iter().zip(&fk.target_columns).map(|(a, b)| (a.as_str(), b.as_str())).collect()
            }
            Candidate::Direct { incoming: true, fk, .. } => {
                fk.target_columns.iter().zip(&fk.columns).map(|(a, b)| (a.as_str(), b.as_str())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// How PGRST201's details describe the candidate, as PostgREST does.
    fn describe(&self, parent: &Relation) -> serde_json::Value {
        let p = &parent.name.name;
        let o = &self.other().name.name;
        let list = |cols: Vec<&str>| format!("({})", cols.join(", "));
        let (cardinality, relationship) = match self {
            Candidate::Direct { incoming, fk, .. } => {
                let pairs = self.pairs();
                let cardinality = match (incoming, self.one_to_one(parent)) {
                    (_, true) => "one-to-one",
                    (false, false) => "many-to-one",
                    (true, false) => "one-to-many",
                };
                let relationship = format!(
                    "{} using {p}{} and {o}{}",
                    fk.name,
                    list(pairs.iter().map(|p| p.0).collect()),
                    list(pairs.iter().map(|p| p.1).collect())
                );
                (cardinality, relationship)
            }
            Candidate::Junction { table, to_parent, to_child, .. } => (
                "many-to-many",
                format!(
                    "{} using {}{} and {}{}",
                    table.name.name,
                    to_parent.name,
                    list(to_parent.columns.iter().map(String::as_str).collect()),
                    to_child.name,
                    list(to_child.columns.iter().map(String::as_str).collect())
                ),
            ),
            Candidate::Computed { function, .. } => ("computed", function.name.name.clone()),
        };
        serde_json::json!({"cardinality": cardinality, "embedding": format!("{p} with {o}"), "relationship": relationship})
    }

    /// How PGRST201's hint names the candidate: `other!constraint` (or the join table).
    fn hint(&self) -> String {
        let name = match self {
            Candidate::Direct { fk, .. } => &fk.name,
            Candidate::Junction { table, .. } => &table.name.name,
            Candidate::Computed { function, .. } => &function.name.name,
        };
        format!("'{}!{name}'", self.other().name.name)
    }

    /// Whether a direct relationship reaches at most one row either way: the referencing
    /// columns are the referencing relation's primary key or a unique key.
    fn one_to_one(&self, parent: &Relation) -> bool {
        let Candidate::Direct { incoming, fk, other } = self else {
            return false;
        };
        let referencing: &Relation = if *incoming { other } else { parent };
        let unique = |key: &Vec<String>| {
            !key.is_empty() && key.len() == fk.columns.len() && key.iter().all(|k| fk.columns.contains(k))
        };
        unique(&referencing.primary_key) || referencing.unique_keys.iter().any(unique)
    }

    /// Whether `embed` (`target!hint`) names this relationship of `parent`, by PostgREST's
    /// rules: the other relation's name, or (when it is no view) the constraint's or the single
    /// referencing column's name; a hint picks among those by constraint, column on either
    /// side or join table. Between a table and itself, the relation's name is the to-many
    /// direction and the referencing column's name the to-one.
    fn named_by(&self, embed: &Embed, parent: &Relation) -> bool {
        let target = embed.name.as_str();
        let other = self.other();
        let by_relation = target == other.name.name;
        match self {
            Candidate::Computed { function, .. } => target == function.name.name,
            Candidate::Junction { table, .. } => {
                by_relation && embed.hint.as_ref().is_none_or(|h| *h == table.name.name)
            }
            Candidate::Direct { incoming, fk, .. } => {
                let pairs = self.pairs();
                let single = (pairs.len() == 1).then(|| pairs[0]);
                let column = |name: &str| single.is_some_and(|(c, _)| c == name);
                let other_column = |name: &str| single.is_some_and(|(_, c)| c == name);
                let is_self = other.name == parent.name;
                match (&embed.hint, is_self) {
                    (None, true) => (by_relation && *incoming) || (column(target) && !*incoming),
                    (Some(h), true) => by_relation && *incoming && other_column(h),
                    (None, false) => {
                        let view = matches!(other.kind, RelationKind::View | RelationKind::MaterializedView);
                        by_relation || (!view && (fk.name == target || column(target)))
                    }
                    (Some(h), false) => by_relation && (fk.name == *h || column(h) || other_column(h)),
                }
            }
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
        let chosen = self.relationship(embed)?;
        let child = chosen.other().clone();
        let link = self.link(chosen);
        // The query string names this level by its alias (or its name when it has none), and
        // under `url-use-legacy-target-names` by its relation's name too.
        let keys: Vec<&String> = match &embed.alias {
            Some(alias) if self.legacy_names => vec![alias, &embed.name],
            Some(alias) => vec![alias],
            None => vec![&embed.name],
        };
        let paths = self
            .paths
            .iter()
            .flat_map(|p| {
                keys.iter().map(move |key| {
                    let mut path = p.clone();
                    path.push((*key).clone());
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
            legacy_names: self.legacy_names,
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

    /// The one relationship `embed` names: a computed relationship first, else the one
    /// foreign key or join table it names (PostgREST's `findRel`); PGRST200 for none, PGRST201
    /// for several.
    fn relationship(&self, embed: &Embed) -> Result<Candidate<'a>, Error> {
        // A computed relationship (a function of the parent's row returning the embedded
        // relation's rows) takes precedence over foreign keys, as in PostgREST.
        if let Some(function) = self.types.computed(self.relation, &embed.name) {
            if let FunctionResult::Composite(q) = &function.returns {
                if let Some(other) = self.types.relations.get(q) {
                    return Ok(Candidate::Computed { function, other });
                }
            }
        }
        let mut found: Vec<Candidate<'a>> =
            self.relationships().into_iter().filter(|c| c.named_by(embed, self.relation)).collect();
        match found.len() {
            0 => Err(self.no_relationship(embed)),
            1 => Ok(found.remove(0)),
            _ => {
                let parent = &self.relation.name.name;
                let details = found.iter().map(|c| c.describe(self.relation)).collect();
                let hints: Vec<String> = found.iter().map(Candidate::hint).collect();
                Err(Error::Api {
                    code: code::AMBIGUOUS_EMBED,
                    message: format!(
                        "Could not embed because more than one relationship was found for '{parent}' and '{}'",
                        embed.name
                    ),
                    details: Some(Details::Json(Box::new(serde_json::Value::Array(details)))),
                    hint: Some(format!(
                        "Try changing '{}' to one of the following: {}. Find the desired relationship in the 'details' key.",
                        embed.name,
                        hints.join(", ")
                    )),
                })
            }
        }
    }

    /// Every relationship of this relation with a relation of its schema: its own foreign
    /// keys, those referencing it, and join tables whose primary key holds a foreign key to it
    /// and one to another relation.
    fn relationships(&self) -> Vec<Candidate<'a>> {
        let parent = &self.relation.name;
        let in_schema = |q: &QualifiedName| q.schema == self.schema;
        let mut tables: Vec<&'a Arc<Relation>> =
            self.types.relations.values().filter(|r| in_schema(&r.name)).collect();
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        let mut all = Vec::new();
        let mut own: Vec<&'a ForeignKey> = self.relation.foreign_keys.iter().collect();
        own.sort_by(|a, b| a.name.cmp(&b.name));
        for fk in own {
            if let Some(other) = self.types.relations.get(&fk.target).filter(|o| in_schema(&o.name)) {
                all.push(Candidate::Direct { incoming: false, fk, other });
            }
        }
        for &other in &tables {
            let mut incoming: Vec<&'a ForeignKey> =
                other.foreign_keys.iter().filter(|fk| fk.target == *parent).collect();
            incoming.sort_by(|a, b| a.name.cmp(&b.name));
            for fk in incoming {
                all.push(Candidate::Direct { incoming: true, fk, other });
            }
        }
        let in_key =
            |table: &Relation, fk: &ForeignKey| fk.columns.iter().all(|c| table.primary_key.contains(c));
        for &table in &tables {
            for to_parent in table.foreign_keys.iter().filter(|fk| fk.target == *parent && in_key(table, fk))
            {
                for to_child in table.foreign_keys.iter().filter(|fk| in_key(table, fk)) {
                    let Some(other) =
                        self.types.relations.get(&to_child.target).filter(|o| in_schema(&o.name))
                    else {
                        continue;
                    };
                    if !std::ptr::eq(to_parent, to_child) {
                        all.push(Candidate::Junction { table, to_parent, to_child, other });
                    }
                }
            }
        }
        all
    }

    /// How `chosen` joins this relation's rows to `child`'s.
    fn link(&self, chosen: Candidate<'_>) -> Link {
        let pairs = |from: &[String], to: &[String]| from.iter().cloned().zip(to.iter().cloned()).collect();
        match chosen {
            Candidate::Computed { function, .. } => Link {
                // `ROWS 1` on a set-returning function declares at most one row: to-one.
                to_many: function.returns_set && function.rows != 1.0,
                join: Vec::new(),
                through: None,
                computed: Some(function.name.clone()),
            },
            // The child references the parent: pairs of (parent column, child column). When the
            // referencing columns are unique in the child, there is at most one: one-to-one.
            Candidate::Direct { incoming: true, fk, .. } => Link {
                to_many: !chosen.one_to_one(self.relation),
                join: pairs(&fk.target_columns, &fk.columns),
                through: None,
                computed: None,
            },
            Candidate::Direct { incoming: false, fk, .. } => Link {
                to_many: false,
                join: pairs(&fk.columns, &fk.target_columns),
                through: None,
                computed: None,
            },
            Candidate::Junction { table, to_parent, to_child, .. } => Link {
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
            "Searched for a foreign key relationship between '{parent}' and '{}'{} in the schema '{}', but no matches were found.",
            embed.name,
            embed.hint.as_ref().map(|h| format!(" using the hint '{h}'")).unwrap_or_default(),
            self.schema
        ))
    }
}
