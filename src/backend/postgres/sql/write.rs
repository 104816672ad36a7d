//! The statement of a write.
//!
//! The body travels as one `json` parameter (`$1`) that PostgreSQL unpacks by the columns'
//! catalog types, as PostgREST does, so one prepared statement serves every body with the same
//! keys. Without anything to return, the statement is the bare INSERT/UPDATE/DELETE: no
//! RETURNING, so a role that may write but not read a table can still write to it. Otherwise
//! it is wrapped as
//!
//! ```sql
//! WITH pgrst_source AS (<write> RETURNING *)
//! SELECT affected, inserted, pgrst_page.* FROM (<counts of pgrst_source>) pgrst_stats
//! LEFT JOIN LATERAL (SELECT 1 AS pgrst_present, <select list> FROM pgrst_source AS pgrst_0) ...
//! ```
//!
//! so the counts arrive even when the representation is filtered down to nothing.

use std::fmt::Write;

use super::filter::where_clause;
use super::read::select_list;
use super::{push_ident, Params, Statement};
use crate::backend::postgres::sql::RowShape;
use crate::plan::{location_columns, BodyColumn, Media, MutatePlan, Mutation, Nested, OnConflict, Returning};
use crate::schema::RelationKind;

/// Everything the database stage runs for one write.
#[derive(Debug, Clone)]
pub struct WriteStatements {
    /// The statement.
    pub main: Statement,
    /// The statement returns rows led by (affected, inserted, present) columns; otherwise it is
    /// the bare write and its command tag tells how many rows it affected.
    pub returns_rows: bool,
    /// The layout of the page columns after the three leading ones.
    pub shape: RowShape,
}

/// Renders the statement of a write plan.
pub fn render_write(plan: &MutatePlan) -> WriteStatements {
    let mut params = Params::default();
    let mut sql = String::with_capacity(512);
    let returns_rows = plan.returns_rows();
    if !returns_rows {
        if !write(plan, &mut sql, &mut params) {
            sql.clear();
            sql.push_str("SELECT 1 WHERE false");
        }
        return WriteStatements {
            main: Statement { text: sql, params: params.0 },
            returns_rows,
            shape: RowShape::Empty,
        };
    }
    sql.push_str("WITH pgrst_source AS (");
    let writes = write(plan, &mut sql, &mut params);
    // xmax is 0 in a row version an INSERT created, and set in one ON CONFLICT DO UPDATE made.
    let xmax = writes
        && plan.tracks_inserts()
        && matches!(plan.relation.kind, RelationKind::Table | RelationKind::PartitionedTable);
    if writes {
        // Qualified: a by-key PATCH has the body's rows in its FROM list too.
        sql.push_str(" RETURNING pgrst_0.*");
        if xmax {
            sql.push_str(", (xmax = 0) AS pgrst_inserted");
        }
    }
    sql.push_str(") SELECT pgrst_stats.affected, pgrst_stats.inserted, pgrst_page.* FROM (SELECT pg_catalog.count(*) AS affected, ");
    sql.push_str(if xmax {
        "pg_catalog.count(*) FILTER (WHERE pgrst_inserted)"
    } else {
        "pg_catalog.count(*)"
    });
    sql.push_str(" AS inserted FROM pgrst_source) pgrst_stats LEFT JOIN LATERAL (SELECT 1 AS pgrst_present");
    if let (Some(handler), Returning::Representation(columns)) = (&plan.handler, &plan.returning) {
        // The handler's body over the representation's rows, and how many there are.
        sql.push_str(", ");
        super::call::handler_body(handler, columns, false, &mut sql);
        sql.push_str(", pg_catalog.count(*) FROM (SELECT ");
        super::read::aliased_list(columns, &mut sql, &mut params);
        sql.push_str(" FROM pgrst_source AS pgrst_0");
        where_clause(&plan.output_conditions, &mut sql, &mut params);
        super::read::order_by(&plan.order, &mut sql, &mut params);
        sql.push_str(") pgrst_h) pgrst_page ON true");
        return WriteStatements {
            main: Statement { text: sql, params: params.0 },
            returns_rows,
            shape: RowShape::Handler,
        };
    }
    let mut list = String::new();
    let shape = match &plan.returning {
        Returning::Representation(columns) => {
            select_list(columns, plan.media, false, plan.postgis.as_deref(), &mut list, &mut params)
        }
        Returning::Location(pk) => select_list(
            &location_columns(pk),
            Media::Json { strip_nulls: false },
            false,
            None,
            &mut list,
            &mut params,
        ),
        Returning::Nothing => RowShape::Empty,
    };
    if !list.is_empty() {
        sql.push_str(", ");
        sql.push_str(&list);
    }
    sql.push_str(" FROM pgrst_source AS pgrst_0");
    where_clause(&plan.output_conditions, &mut sql, &mut params);
    super::read::order_by(&plan.order, &mut sql, &mut params);
    sql.push_str(") pgrst_page ON true");
    WriteStatements { main: Statement { text: sql, params: params.0 }, returns_rows, shape }
}

/// Writes the INSERT, UPDATE or DELETE; false (and a row source that yields nothing) when
/// there is nothing to write: a PATCH with an empty body.
fn write(plan: &MutatePlan, sql: &mut String, params: &mut Params) -> bool {
    let rel = &plan.relation.name;
    let target = |sql: &mut String| {
        super::push_qualified(sql, rel);
        sql.push_str(" AS pgrst_0");
    };
    match &plan.mutation {
        Mutation::Insert { payload, columns, missing_default, on_conflict, put_key } => {
            insert_rows(&plan.relation.name, &payload.json, columns, *missing_default, &[], sql, params);
            for (i, (column, value)) in put_key.iter().enumerate() {
                sql.push_str(if i == 0 { " WHERE " } else { " AND " });
                // Both sides in the column's type: the body's value and the URL's read through
                // the domain's representations, when it has them.
                let body_column = columns.iter().find(|c| c.name == *column);
                match body_column {
                    Some(c) => body_value(c, Some("pgrst_body"), sql),
                    None => {
                        sql.push_str("pgrst_body.");
                        push_ident(sql, column);
                    }
                }
                sql.push_str(" = ");
                match body_column.and_then(|c| c.parse_text.as_ref()) {
                    Some(parse) => {
                        super::push_qualified(sql, parse);
                        sql.push('(');
                        params.push(sql, value.clone());
                        sql.push_str("::text)");
                    }
                    None => params.push(sql, value.clone()),
                }
            }
            if let Some(OnConflict { target, merge }) = on_conflict {
                sql.push_str(" ON CONFLICT (");
                idents(target.iter().map(String::as_str), sql);
                if *merge && !columns.is_empty() {
                    sql.push_str(") DO UPDATE SET ");
                    for (i, c) in columns.iter().enumerate() {
                        if i > 0 {
                            sql.push_str(", ");
                        }
                        push_ident(sql, &c.name);
                        sql.push_str(" = EXCLUDED.");
                        push_ident(sql, &c.name);
                    }
                } else {
                    sql.push_str(") DO NOTHING");
                }
            }
            true
        }
        Mutation::Update { payload, columns } => {
            if columns.is_empty() {
                sql.push_str("SELECT * FROM ");
                target(sql);
                sql.push_str(" WHERE false");
                return false;
            }
            sql.push_str("UPDATE ");
            target(sql);
            sql.push_str(" SET ");
            let (from_body, defaults): (Vec<&BodyColumn>, Vec<&BodyColumn>) =
                columns.iter().partition(|c| c.in_payload);
            if !from_body.is_empty() {
                // A row assignment from one uncorrelated subquery: the body is unpacked once,
                // and its column names cannot shadow the table's in the WHERE clause.
                sql.push('(');
                idents(from_body.iter().map(|c| c.name.as_str()), sql);
                sql.push_str(") = (SELECT ");
                for (i, c) in from_body.iter().enumerate() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    body_value(c, None, sql);
                }
                sql.push_str(" FROM json_to_record((");
                params.push(sql, payload.json.clone());
                sql.push_str("::json) -> 0) AS pgrst_body");
                record_definition(&from_body.iter().map(|c| (*c).clone()).collect::<Vec<_>>(), sql);
                sql.push(')');
            }
            for (i, c) in defaults.iter().enumerate() {
                if i > 0 || !from_body.is_empty() {
                    sql.push_str(", ");
                }
                push_ident(sql, &c.name);
                sql.push_str(" = DEFAULT");
            }
            where_clause(&plan.conditions, sql, params);
            true
        }
        Mutation::UpdateByKey { payload, key, columns } => {
            if columns.is_empty() {
                sql.push_str("SELECT * FROM ");
                target(sql);
                sql.push_str(" WHERE false");
                return false;
            }
            sql.push_str("UPDATE ");
            target(sql);
            sql.push_str(" SET ");
            for (i, c) in columns.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                push_ident(sql, &c.name);
                let _ = write!(sql, " = pgrst_body.pgrst_v{i}");
            }
            // The body's columns are renamed so that the filters' unqualified column names can
            // only mean the table's.
            sql.push_str(" FROM (SELECT ");
            for (i, c) in key.iter().enumerate() {
                body_value(c, None, sql);
                let _ = write!(sql, " AS pgrst_k{i}, ");
            }
            for (i, c) in columns.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                body_value(c, None, sql);
                let _ = write!(sql, " AS pgrst_v{i}");
            }
            sql.push_str(" FROM json_to_recordset(");
            params.push(sql, payload.json.clone());
            sql.push_str("::json) AS pgrst_r");
            let all: Vec<BodyColumn> = key.iter().chain(columns.iter()).cloned().collect();
            record_definition(&all, sql);
            sql.push_str(") AS pgrst_body WHERE ");
            for (i, c) in key.iter().enumerate() {
                if i > 0 {
                    sql.push_str(" AND ");
                }
                sql.push_str("pgrst_0.");
                push_ident(sql, &c.name);
                let _ = write!(sql, " = pgrst_body.pgrst_k{i}");
            }
            for c in &plan.conditions {
                sql.push_str(" AND ");
                super::filter::condition(c, sql, params);
            }
            true
        }
        Mutation::Delete => {
            sql.push_str("DELETE FROM ");
            target(sql);
            where_clause(&plan.conditions, sql, params);
            true
        }
    }
}

/// `INSERT INTO rel AS pgrst_0 (cols) SELECT ... FROM <the JSON array's objects>`, with
/// `fixed` columns set to the same bound value in every row (a nested insert's link to its
/// parent), each cast to its type.
fn insert_rows(
    rel: &crate::schema::QualifiedName,
    json: &str,
    columns: &[BodyColumn],
    missing_default: bool,
    fixed: &[(String, String, String)],
    sql: &mut String,
    params: &mut Params,
) {
    sql.push_str("INSERT INTO ");
    super::push_qualified(sql, rel);
    sql.push_str(" AS pgrst_0");
    if !columns.is_empty() || !fixed.is_empty() {
        sql.push_str(" (");
        idents(columns.iter().map(|c| c.name.as_str()).chain(fixed.iter().map(|(c, _, _)| c.as_str())), sql);
        sql.push(')');
    }
    sql.push_str(" SELECT ");
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        match (&c.default, missing_default) {
            // Absent from this object: the column default, evaluated only for such rows.
            (Some(default), true) => {
                sql.push_str("CASE WHEN pgrst_elem.value -> ");
                push_literal(sql, &c.name);
                sql.push_str(" IS NULL THEN (");
                sql.push_str(default);
                sql.push_str(")::");
                sql.push_str(&c.type_name);
                sql.push_str(" ELSE ");
                body_value(c, Some("pgrst_body"), sql);
                sql.push_str(" END");
            }
            _ => body_value(c, Some("pgrst_body"), sql),
        }
    }
    // The fixed values come after the body: $1 is always the body.
    let mut fixed_sql = String::new();
    let mut fixed_params = Params(vec![json.to_owned()]);
    for (i, (_, type_name, value)) in fixed.iter().enumerate() {
        if i > 0 || !columns.is_empty() {
            fixed_sql.push_str(", ");
        }
        fixed_params.push(&mut fixed_sql, value.clone());
        fixed_sql.push_str("::");
        fixed_sql.push_str(type_name);
    }
    sql.push_str(&fixed_sql);
    sql.push_str(" FROM ");
    let body = |sql: &mut String, params: &mut Params| {
        params.push(sql, json.to_owned());
    };
    if columns.is_empty() {
        sql.push_str("json_array_elements(");
        body(sql, params);
        sql.push_str("::json) AS pgrst_elem");
    } else if missing_default {
        sql.push_str("json_array_elements(");
        body(sql, params);
        sql.push_str("::json) AS pgrst_elem, LATERAL json_to_record(pgrst_elem.value) AS pgrst_body");
        record_definition(columns, sql);
    } else {
        sql.push_str("json_to_recordset(");
        body(sql, params);
        sql.push_str("::json) AS pgrst_body");
        record_definition(columns, sql);
    }
    params.0.extend(fixed_params.0.into_iter().skip(1));
}

/// A nested insert's statement for one parent object: insert it and return the parent columns
/// its children link to, and its primary key, as text.
pub fn insert_parent(plan: &MutatePlan, object: &str, returned: &[String]) -> Statement {
    let mut params = Params::default();
    let mut sql = String::with_capacity(256);
    let Mutation::Insert { columns, missing_default, .. } = &plan.mutation else {
        unreachable!("nested inserts are inserts")
    };
    insert_rows(
        &plan.relation.name,
        &format!("[{object}]"),
        columns,
        *missing_default,
        &[],
        &mut sql,
        &mut params,
    );
    sql.push_str(" RETURNING ");
    for (i, c) in returned.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str("pgrst_0.");
        push_ident(&mut sql, c);
        sql.push_str("::text");
    }
    Statement { text: sql, params: params.0 }
}

/// A nested insert's statement for the children of one parent row: `children` (a JSON array of
/// objects) with the link columns set to `parent` values (text, in `nested.link` order).
pub fn insert_children(nested: &Nested, children: &str, parent: &[String]) -> Statement {
    let mut params = Params::default();
    let mut sql = String::with_capacity(256);
    let fixed: Vec<(String, String, String)> =
        nested.link.iter().zip(parent).map(|((c, t, _), v)| (c.clone(), t.clone(), v.clone())).collect();
    // Children may differ in their keys: one a child leaves out takes the column default.
    insert_rows(&nested.child.name, children, &nested.columns, true, &fixed, &mut sql, &mut params);
    Statement { text: sql, params: params.0 }
}

/// `("a" integer, "b" text)`: the record type `json_to_record(set)` unpacks into. Type names
/// come from the catalog (`format_type`), never from the request.
fn record_definition(columns: &[BodyColumn], sql: &mut String) {
    sql.push('(');
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        push_ident(sql, &c.name);
        sql.push(' ');
        // A column whose domain reads its value from JSON is unpacked as JSON, for its parser.
        sql.push_str(if c.parse.is_some() { "json" } else { &c.type_name });
    }
    sql.push(')');
}

/// A body column's value in the unpacked body `record` (`pgrst_body."c"`, or the bare name
/// without a record): through its domain's parser when it has one.
fn body_value(c: &BodyColumn, record: Option<&str>, sql: &mut String) {
    if let Some(f) = &c.parse {
        super::push_qualified(sql, f);
        sql.push('(');
    }
    if let Some(r) = record {
        sql.push_str(r);
        sql.push('.');
    }
    push_ident(sql, &c.name);
    if c.parse.is_some() {
        sql.push(')');
    }
}

fn idents<'a>(names: impl Iterator<Item = &'a str>, sql: &mut String) {
    for (i, name) in names.enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        push_ident(sql, name);
    }
}

/// A string literal of a column name from the schema cache (standard_conforming_strings).
fn push_literal(sql: &mut String, text: &str) {
    sql.push('\'');
    sql.push_str(&text.replace('\'', "''"));
    sql.push('\'');
}
