//! Names of one relation resolved against the schema cache: the selected columns (fields, JSON
//! paths, casts, aggregates, spreads) and a level's filters, logic trees and order.

use rowgate_request::{EmbedPath, Field, Filter, IsValue, LogicTree, Operation, OrderTerm, SelectItem};

use super::{not_embedded, Condition, Expr, OrderBy, OutputColumn};
use crate::config::Config;
use crate::error::{code, sqlstate, Error};
use crate::schema::{Column, Relation, SchemaCache, ValueKind};

/// Items one level's select list may have: PostgreSQL's own bound on a table's columns (its
/// target lists take 1,664 entries, a 500 beyond, and rowgate adds a few of its own).
const MAX_SELECT: usize = 1_600;

/// Resolves names of one relation.
pub(super) struct Planner<'a> {
    pub(super) relation: &'a Relation,
    pub(super) types: &'a SchemaCache,
    /// The schema the request runs in (embedded relations are looked up there).
    pub(super) schema: &'a str,
    /// Nesting level of embeds (0 for the top-level relation), which names its SQL alias.
    pub(super) depth: usize,
    /// The query string, for the filters, order and limits of this level.
    pub(super) query: &'a rowgate_request::QueryParams,
    /// The embed paths that name this level (by alias and by name); `[[]]` at the top.
    pub(super) paths: Vec<EmbedPath>,
    /// What column errors call the relation, if not its name (`pgrst_call` for a function's
    /// rows, as PostgREST's messages do).
    pub(super) label: Option<&'a str>,
    /// `db-aggregates-enabled`.
    pub(super) aggregates: bool,
    /// `url-use-legacy-target-names`: an aliased embed is also named by its relation's name.
    pub(super) legacy_names: bool,
}

/// The conditions the top-level filters and logic trees of `query` put on `relation` (an
/// access rule's row filter): the same names, operators and errors as a request's.
pub fn row_filter(
    relation: &Relation,
    schema: &SchemaCache,
    query: &rowgate_request::QueryParams,
    config: &Config,
) -> Result<Vec<Condition>, Error> {
    let planner = Planner::top(relation, schema, &relation.name.schema, query, config);
    Ok(planner.level(&[])?.0)
}

impl<'a> Planner<'a> {
    /// The planner of a request's top-level relation.
    pub(super) fn top(
        relation: &'a Relation,
        types: &'a SchemaCache,
        schema: &'a str,
        query: &'a rowgate_request::QueryParams,
        config: &Config,
    ) -> Self {
        Planner {
            relation,
            types,
            schema,
            depth: 0,
            query,
            paths: vec![Vec::new()],
            label: None,
            aggregates: config.db.aggregates_enabled,
            legacy_names: config.url_use_legacy_target_names,
        }
    }

    fn column(&self, name: &str) -> Result<&Column, Error> {
        self.relation.column(name).ok_or_else(|| {
            let rel = self.label.unwrap_or(&self.relation.name.name);
            let e =
                Error::sql(sqlstate::UNDEFINED_COLUMN, format!("column {rel}.{name} does not exist"), false);
            match crate::schema::closest(name, self.relation.columns.iter().map(|c| c.name.as_str())) {
                Some(c) => e.with_hint(format!("Perhaps you meant to reference the column \"{rel}.{c}\".")),
                None => e,
            }
        })
    }

    /// A field's expression and the kind of its values.
    pub(super) fn field(&self, field: &Field) -> Result<(Expr, ValueKind), Error> {
        if self.relation.column(&field.name).is_none() && field.json_path.is_empty() {
            // A computed field: a function of this relation's row returning one value.
            if let Some(f) = self.types.computed(self.relation, &field.name) {
                if let (false, crate::schema::FunctionResult::Scalar(kind)) = (f.returns_set, &f.returns) {
                    return Ok((Expr::Computed { function: f.name.clone(), depth: self.depth }, *kind));
                }
            }
        }
        let column = self.column(&field.name)?;
        match field.json_path.last() {
            None => Ok((Expr::Column(column.name.clone()), column.kind)),
            Some(last) => {
                let kind = if last.as_text {
                    ValueKind::Text
                } else if column.kind == ValueKind::Json {
                    ValueKind::Json
                } else {
                    // `->` on jsonb, and on composite or array columns via `to_jsonb`.
                    ValueKind::Jsonb
                };
                let expr = Expr::JsonPath {
                    column: column.name.clone(),
                    steps: field.json_path.clone(),
                    to_jsonb: column.kind == ValueKind::Other,
                };
                Ok((expr, kind))
            }
        }
    }

    /// `count()`: the level's rows counted, `count` unless aliased.
    fn count_all(&self, alias: &Option<String>, cast: &Option<String>) -> Result<OutputColumn, Error> {
        let expr = Expr::Aggregate(rowgate_request::Aggregate::Count, None);
        let (expr, kind) = self.cast(expr, ValueKind::Int8, cast)?;
        Ok(OutputColumn { key: alias.clone().unwrap_or_else(|| "count".into()), expr, kind })
    }

    /// A column of a domain with a data representation in answers (an implicit cast to `json`,
    /// as PostgREST's "domain representations"): the cast's function of its value, as JSON.
    fn represented(&self, column: &Column, expr: Expr, kind: ValueKind) -> (Expr, ValueKind) {
        match self.types.json_representations.get(&column.type_oid) {
            Some(function) => {
                (Expr::Represented { function: function.clone(), expr: Box::new(expr) }, ValueKind::Json)
            }
            None => (expr, kind),
        }
    }

    fn cast(&self, expr: Expr, kind: ValueKind, cast: &Option<String>) -> Result<(Expr, ValueKind), Error> {
        let Some(ty) = cast else { return Ok((expr, kind)) };
        let base = ty.strip_suffix("[]").unwrap_or(ty).trim().to_ascii_lowercase();
        if !self.types.type_names.contains(&base) {
            return Err(Error::sql(
                sqlstate::UNDEFINED_OBJECT,
                format!("type \"{ty}\" does not exist"),
                false,
            ));
        }
        let kind = if ty.ends_with("[]") { ValueKind::Other } else { cast_kind(&base) };
        Ok((Expr::Cast(Box::new(expr), ty.to_ascii_lowercase()), kind))
    }

    pub(super) fn columns(&self, select: &[SelectItem]) -> Result<Vec<OutputColumn>, Error> {
        let mut out = Vec::new();
        // Two embeds under one name would be one JSON key twice; PostgREST's SQL refuses them
        // (42712): one needs an alias.
        let mut embed_keys = std::collections::HashSet::new();
        for item in select {
            if let SelectItem::Embed(e) = item {
                let key = e.alias.as_ref().unwrap_or(&e.name);
                if !e.spread && !embed_keys.insert(key) {
                    return Err(Error::sql(
                        "42712",
                        format!("table name \"{key}\" specified more than once"),
                        false,
                    )
                    .with_hint(format!("Give each embedding of '{key}' an alias of its own")));
                }
            }
        }
        for item in select {
            match item {
                SelectItem::Star => out.extend(self.relation.columns.iter().map(|c| {
                    let (expr, kind) = self.represented(c, Expr::Column(c.name.clone()), c.kind);
                    OutputColumn { key: c.name.clone(), expr, kind }
                })),
                // PostgreSQL reads `t.count` as `count(t)` when `t` has no such column, so
                // PostgREST's `select=count` and `rel(count)` count the rows, with or without
                // `db-aggregates-enabled`.
                SelectItem::Field { field, alias, cast, aggregate: None, aggregate_cast: None }
                    if field.name == "count"
                        && field.json_path.is_empty()
                        && self.relation.column("count").is_none()
                        && self.types.computed(self.relation, "count").is_none() =>
                {
                    out.push(self.count_all(alias, cast)?);
                }
                // `col::a::b` without an aggregate: both casts, in order (over the column's
                // representation, if its domain has one).
                SelectItem::Field { field, alias, cast, aggregate: None, aggregate_cast } => {
                    let (expr, kind) = self.field(field)?;
                    let (expr, kind) = match self.relation.column(&field.name) {
                        Some(c) if field.json_path.is_empty() => self.represented(c, expr, kind),
                        _ => (expr, kind),
                    };
                    let (expr, kind) = self.cast(expr, kind, cast)?;
                    let (expr, kind) = self.cast(expr, kind, aggregate_cast)?;
                    let key = alias.clone().unwrap_or_else(|| output_name(field));
                    out.push(OutputColumn { key, expr, kind });
                }
                SelectItem::Field { .. } | SelectItem::CountAll { .. } if !self.aggregates => {
                    return Err(Error::api(
                        code::AGGREGATES_DISABLED,
                        "Use of aggregate functions is not allowed",
                    ))
                }
                SelectItem::CountAll { alias, cast } => {
                    out.push(self.count_all(alias, cast)?);
                }
                SelectItem::Field { field, alias, cast, aggregate: Some(agg), aggregate_cast } => {
                    use rowgate_request::Aggregate as A;
                    let (arg, arg_kind) = self.field(field)?;
                    let (arg, arg_kind) = self.cast(arg, arg_kind, cast)?;
                    let kind = match agg {
                        A::Count => ValueKind::Int8,
                        A::Min | A::Max => arg_kind,
                        // sum(int4) is int8, sum(int8) numeric, avg numeric or float: to_json decides.
                        A::Sum | A::Avg => ValueKind::Other,
                    };
                    let expr = Expr::Aggregate(*agg, Some(Box::new(arg)));
                    let (expr, kind) = self.cast(expr, kind, aggregate_cast)?;
                    let name = match agg {
                        A::Count => "count",
                        A::Sum => "sum",
                        A::Avg => "avg",
                        A::Max => "max",
                        A::Min => "min",
                    };
                    out.push(OutputColumn { key: alias.clone().unwrap_or_else(|| name.into()), expr, kind });
                }
                SelectItem::Embed(embed) if embed.spread => out.extend(spread(self.embed(embed)?)?),
                SelectItem::Embed(embed) => out.push(self.embed(embed)?),
            }
            if out.len() > MAX_SELECT {
                return Err(Error::api(
                    code::TOO_COMPLEX,
                    format!("The select list has more than {MAX_SELECT} items at one level"),
                ));
            }
        }
        Ok(out)
    }

    /// The conditions and order terms the query string gives this level.
    pub(super) fn level(&self, columns: &[OutputColumn]) -> Result<(Vec<Condition>, Vec<OrderBy>), Error> {
        let here = |p: &EmbedPath| self.paths.contains(p);
        let mut conditions = Vec::new();
        for (_, filter) in self.query.filters.iter().filter(|(p, _)| here(p)) {
            conditions.push(self.filter(filter, columns)?);
        }
        for (_, tree) in self.query.logic.iter().filter(|(p, _)| here(p)) {
            conditions.push(self.logic(tree, columns)?);
        }
        let mut order = Vec::new();
        for (_, terms) in self.query.order.iter().filter(|(p, _)| here(p)) {
            for term in terms {
                order.push(self.order(term, columns)?);
            }
        }
        Ok((conditions, order))
    }

    /// A filter; `embed=is.null` / `embed=not.is.null` on an embedded resource of `columns`
    /// keeps the rows without / with a related row, as PostgREST does.
    fn filter(&self, filter: &Filter, columns: &[OutputColumn]) -> Result<Condition, Error> {
        if let (true, Operation::Is(v @ (IsValue::Null | IsValue::NotNull))) =
            (filter.field.json_path.is_empty(), &filter.operation)
        {
            let embed = columns.iter().find_map(|c| match &c.expr {
                Expr::Embed(e) if c.key == filter.field.name || e.relation.name.name == filter.field.name => {
                    Some(e)
                }
                _ => None,
            });
            if let Some(e) = embed {
                let wants_rows = (*v == IsValue::NotNull) != filter.negated;
                return Ok(Condition::Exists { embed: e.clone(), negated: !wants_rows });
            }
        }
        let (expr, kind) = self.field(&filter.field)?;
        let parse = match self.relation.column(&filter.field.name) {
            Some(c) if filter.field.json_path.is_empty() => self.types.text_parsers.get(&c.type_oid).cloned(),
            _ => None,
        };
        Ok(Condition::Filter { expr, kind, filter: filter.clone(), parse })
    }

    fn logic(&self, tree: &LogicTree, columns: &[OutputColumn]) -> Result<Condition, Error> {
        match tree {
            LogicTree::Filter(f) => self.filter(f, columns),
            LogicTree::Expr { negated, op, children } => Ok(Condition::Logic {
                negated: *negated,
                op: *op,
                children: children.iter().map(|c| self.logic(c, columns)).collect::<Result<_, _>>()?,
            }),
        }
    }

    /// An order term; `rel(col)` orders by a column of a to-one embedded resource of `columns`.
    fn order(&self, term: &OrderTerm, columns: &[OutputColumn]) -> Result<OrderBy, Error> {
        let Some(rel) = &term.relation else {
            let (expr, _) = self.field(&term.field)?;
            return Ok(OrderBy { expr, term: term.clone() });
        };
        let embed = columns.iter().find_map(|c| match &c.expr {
            Expr::Embed(e) if c.key == *rel || e.relation.name.name == *rel => Some(e),
            Expr::Related { embed, .. } if embed.relation.name.name == *rel => Some(embed),
            _ => None,
        });
        let Some(embed) = embed else {
            return Err(not_embedded(&vec![rel.clone()], rel));
        };
        if embed.to_many {
            return Err(Error::Api {
                code: code::RELATED_ORDER,
                message: format!("A related order on '{rel}' is not possible"),
                details: Some(
                    format!(
                        "'{}' and '{rel}' do not form a many-to-one or one-to-one relationship",
                        self.relation.name.name
                    )
                    .into(),
                ),
                hint: None,
            });
        }
        let inner = Planner {
            relation: &embed.relation,
            types: self.types,
            schema: self.schema,
            depth: embed.depth,
            query: self.query,
            paths: Vec::new(),
            label: None,
            aggregates: self.aggregates,
            legacy_names: self.legacy_names,
        };
        let (expr, _) = inner.field(&term.field)?;
        let mut related = embed.clone();
        related.columns.clear();
        Ok(OrderBy {
            expr: Expr::Related { embed: related, expr: Box::new(expr), many: false },
            term: term.clone(),
        })
    }
}

/// The columns a spread `...rel(cols)` lifts into its parent: each a value of the one related
/// row, or for a to-many relationship the array of its values over every related row.
pub(super) fn spread(embed: OutputColumn) -> Result<Vec<OutputColumn>, Error> {
    let Expr::Embed(mut plan) = embed.expr else { return Ok(vec![embed]) };
    let columns = std::mem::take(&mut plan.columns);
    let aggregate = |e: &Expr| {
        e.is_aggregate() || matches!(e, Expr::Related { expr, .. } if matches!(**expr, Expr::Aggregate(..)))
    };
    if plan.to_many && columns.iter().any(|c| aggregate(&c.expr)) {
        return Err(Error::api(code::NOT_IMPLEMENTED, "Feature not implemented")
            .with_details("Aggregates are not implemented for one-to-many or many-to-many spreads."));
    }
    Ok(columns
        .into_iter()
        .filter(OutputColumn::is_output)
        .map(|c| OutputColumn {
            key: c.key,
            kind: if plan.to_many { ValueKind::Json } else { c.kind },
            expr: Expr::Related { embed: plan.clone(), expr: Box::new(c.expr), many: plan.to_many },
        })
        .collect())
}

/// `EXISTS` conditions for the `!inner` embeds among `columns`.
pub(super) fn inner_joins(columns: &[OutputColumn]) -> Vec<Condition> {
    columns
        .iter()
        .filter_map(|c| match &c.expr {
            Expr::Embed(e) if e.inner => Some(Condition::Exists { embed: e.clone(), negated: false }),
            _ => None,
        })
        .collect()
}

/// The JSON key of an unaliased field: the last object key of its JSON path (an index names
/// nothing), else the column, as PostgREST names it.
fn output_name(field: &Field) -> String {
    field
        .json_path
        .iter()
        .rev()
        .find_map(|step| match &step.key {
            rowgate_request::JsonKey::Key(k) => Some(k.clone()),
            rowgate_request::JsonKey::Index(_) => None,
        })
        .unwrap_or_else(|| field.name.clone())
}

/// The value kind of a cast target, for the types rowgate renders itself.
fn cast_kind(ty: &str) -> ValueKind {
    match ty {
        "int2" | "smallint" => ValueKind::Int2,
        "int4" | "int" | "integer" => ValueKind::Int4,
        "int8" | "bigint" => ValueKind::Int8,
        "numeric" | "decimal" => ValueKind::Numeric,
        "bool" | "boolean" => ValueKind::Bool,
        "text" | "varchar" | "character varying" | "name" => ValueKind::Text,
        "uuid" => ValueKind::Uuid,
        "date" => ValueKind::Date,
        "timestamp" | "timestamp without time zone" => ValueKind::Timestamp,
        "json" => ValueKind::Json,
        "jsonb" => ValueKind::Jsonb,
        _ => ValueKind::Other,
    }
}
