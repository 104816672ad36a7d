//! A write on SQLite: the statement (`INSERT ... RETURNING rowid`, `UPDATE`, `DELETE`) under the
//! caller's rule for the operation, and the reads around it in the same transaction — the
//! rows a DELETE removes, the rule's check of the rows written (a policy's `WITH CHECK`), the
//! representation and `Location` as the caller's read rules show them, and how many rows an
//! upsert inserted.

use rowgate_request::LogicOp;

use super::filter::condition;
use super::read::{object, source};
use super::{unsupported, Ctx, Rendered, RowRules};
use crate::backend::{push_ident, Statement};
use crate::error::{sqlstate, Error};
use crate::plan::{BodyColumn, Condition, Media, MutatePlan, Mutation, OnConflict, Payload, Returning};
use crate::schema::ValueKind;

/// The statements of a write on SQLite, run in one transaction on the read-write connection.
/// The write returns the rowids it wrote; the statements after it take them as `?1` (a JSON
/// array).
#[derive(Debug, Clone)]
pub struct SqliteWrite {
    /// Run first: the representation of the rows a DELETE is about to remove (body, count).
    pub before: Option<Statement>,
    /// The write, `RETURNING rowid`.
    pub write: Statement,
    /// The number of written rows the caller's rule for the operation does not allow (which
    /// fails the write, as a policy's `WITH CHECK` does).
    pub check: Option<Statement>,
    /// The representation of the written rows (body, count).
    pub representation: Option<Statement>,
    /// The primary key values (a JSON array of text) of the first row, for `Location`.
    pub location: Option<Statement>,
    /// Run before the write: how many of an upsert's rows it will insert (not update).
    pub inserted: Option<Statement>,
}

/// Renders a write plan for SQLite. `rule` is the caller's row condition for the operation
/// (`None`: every row), `update_rule` a merging upsert's for the rows it updates; `rules` the
/// read rules that shape the representation.
pub fn render_write(
    plan: &MutatePlan,
    rule: Option<&Condition>,
    update_rule: Option<&Condition>,
    rules: &RowRules,
) -> Result<SqliteWrite, Error> {
    if !matches!(plan.media, Media::Json { strip_nulls: false } | Media::Single { strip_nulls: false }) {
        return Err(unsupported(format!("The media type {}", plan.media.content_type())));
    }
    if !plan.nested.is_empty() {
        return Err(unsupported("A nested insert"));
    }
    if let Mutation::Insert { payload, .. } | Mutation::Update { payload, .. } = &plan.mutation {
        json_text_valid(plan, payload)?;
    }
    let mut params = Ctx::new(rules);
    let mut sql = String::with_capacity(256);
    let (mut before, mut inserted) = (None, None);
    match &plan.mutation {
        Mutation::Insert { payload, columns, missing_default, on_conflict, put_key } => {
            insert(plan, columns, payload, *missing_default, put_key, &mut sql, &mut params)?;
            // (SQLite takes no upsert clause after `DEFAULT VALUES`.)
            if let Some(conflict) = on_conflict.as_ref().filter(|_| !columns.is_empty()) {
                upsert(plan, columns, conflict, update_rule, &mut sql, &mut params)?;
                if plan.tracks_inserts() {
                    inserted = Some(inserts_of(&plan.relation.name.name, payload, conflict, put_key, rules)?);
                }
            }
        }
        Mutation::Update { columns, .. } if columns.is_empty() => {
            // Nothing to set: nothing written, as with PostgREST.
            sql.push_str("SELECT rowid FROM ");
            push_ident(&mut sql, &plan.relation.name.name);
            sql.push_str(" WHERE 0");
            return Ok(SqliteWrite {
                before: None,
                write: Statement { text: sql, params: params.values },
                check: None,
                representation: representation(plan, rules, None)?,
                location: None,
                inserted: None,
            });
        }
        Mutation::Update { payload, columns } => {
            update(plan, columns, payload, &mut sql, &mut params)?;
            restricted(plan, rule, &mut sql, &mut params)?;
        }
        Mutation::UpdateByKey { .. } => return Err(unsupported("Prefer: patch=by-key")),
        Mutation::Delete => {
            // The rows as they are, read just before they go.
            before = representation(
                plan,
                rules,
                Some(&|sql: &mut String, p: &mut Ctx<'_>| restricted(plan, rule, sql, p)),
            )?;
            sql.push_str("DELETE FROM ");
            push_ident(&mut sql, &plan.relation.name.name);
            sql.push_str(" AS pgrst_0");
            restricted(plan, rule, &mut sql, &mut params)?;
        }
    }
    sql.push_str(" RETURNING rowid");
    Ok(SqliteWrite {
        before,
        write: Statement { text: sql, params: params.values },
        check: check(plan, rule, update_rule, rules)?,
        representation: match plan.mutation {
            Mutation::Delete => None,
            _ => representation(plan, rules, None)?,
        },
        location: location(plan, rules)?,
        inserted,
    })
}

/// ` WHERE 1 AND <the operation's rule> AND <the plan's conditions>`: the rows an UPDATE or
/// DELETE may write (the rule's `USING`).
fn restricted(
    plan: &MutatePlan,
    rule: Option<&Condition>,
    sql: &mut String,
    params: &mut Ctx<'_>,
) -> Rendered {
    sql.push_str(" WHERE 1");
    for c in rule.into_iter().chain(&plan.conditions) {
        sql.push_str(" AND ");
        condition(c, sql, params)?;
    }
    Ok(())
}

/// `INSERT OR ABORT INTO t (cols) SELECT <each body object's values> FROM json_each(?)`. OR
/// ABORT: a constraint declared ON CONFLICT REPLACE would otherwise delete the conflicting row,
/// which no delete rule was asked about.
fn insert(
    plan: &MutatePlan,
    columns: &[BodyColumn],
    payload: &Payload,
    missing_default: bool,
    put_key: &[(String, String)],
    sql: &mut String,
    params: &mut Ctx<'_>,
) -> Rendered {
    sql.push_str("INSERT OR ABORT INTO ");
    push_ident(sql, &plan.relation.name.name);
    if columns.is_empty() {
        if payload.rows == 0 {
            // An empty array inserts nothing (an INSERT that selects no row).
            let first = plan.relation.columns.first().map_or("rowid", |c| c.name.as_str());
            sql.push_str(" (");
            push_ident(sql, first);
            sql.push_str(") SELECT NULL WHERE 0");
            return Ok(());
        }
        if payload.rows != 1 {
            return Err(unsupported("Inserting several rows with no columns"));
        }
        sql.push_str(" DEFAULT VALUES");
        return Ok(());
    }
    sql.push_str(" (");
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        push_ident(sql, &c.name);
    }
    sql.push_str(") SELECT ");
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        let kind = value_kind(plan, &c.name, payload.textual);
        if missing_default || !c.in_payload {
            sql.push_str("CASE WHEN EXISTS (SELECT 1 FROM json_each(pgrst_body.value) WHERE key = ");
            params.push(sql, c.name.clone());
            sql.push_str(") THEN ");
            body_value(sql, params, "pgrst_body.value", &c.name, kind);
            // The column's default: SQL text from the database's own schema.
            sql.push_str(" ELSE (");
            sql.push_str(c.default.as_deref().unwrap_or("NULL"));
            sql.push_str(") END");
        } else {
            body_value(sql, params, "pgrst_body.value", &c.name, kind);
        }
    }
    sql.push_str(" FROM json_each(");
    params.push(sql, payload.json.clone());
    // (`WHERE true` keeps the parser from reading an upsert clause here.)
    sql.push_str(") AS pgrst_body WHERE true");
    put_matches(sql, params, put_key);
    Ok(())
}

/// ` ON CONFLICT (target) DO UPDATE SET ... WHERE <update rule>` or `DO NOTHING`.
fn upsert(
    plan: &MutatePlan,
    columns: &[BodyColumn],
    conflict: &OnConflict,
    update_rule: Option<&Condition>,
    sql: &mut String,
    params: &mut Ctx<'_>,
) -> Rendered {
    unique_target(&plan.relation, &conflict.target)?;
    sql.push_str(" ON CONFLICT (");
    for (i, c) in conflict.target.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        push_ident(sql, c);
    }
    if !conflict.merge {
        sql.push_str(") DO NOTHING");
        return Ok(());
    }
    sql.push_str(") DO UPDATE SET ");
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        push_ident(sql, &c.name);
        sql.push_str(" = excluded.");
        push_ident(sql, &c.name);
    }
    // Only rows the caller may update are (its update rule's `USING`).
    if let Some(u) = update_rule {
        sql.push_str(" WHERE ");
        condition(u, sql, params)?;
    }
    Ok(())
}

/// `UPDATE OR ABORT t AS pgrst_0 SET col = <the body object's value>, ...`.
fn update(
    plan: &MutatePlan,
    columns: &[BodyColumn],
    payload: &Payload,
    sql: &mut String,
    params: &mut Ctx<'_>,
) -> Rendered {
    sql.push_str("UPDATE OR ABORT ");
    push_ident(sql, &plan.relation.name.name);
    sql.push_str(" AS pgrst_0 SET ");
    let mut object = String::new();
    params.push(&mut object, payload.json.clone());
    let object = format!("({object} -> 0)");
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        push_ident(sql, &c.name);
        sql.push_str(" = ");
        if c.in_payload {
            let kind = value_kind(plan, &c.name, payload.textual);
            body_value(sql, params, &object, &c.name, kind);
        } else {
            sql.push('(');
            sql.push_str(c.default.as_deref().unwrap_or("NULL"));
            sql.push(')');
        }
    }
    Ok(())
}

/// How many written rows (rowids in `?1`) the caller's rule does not allow: every row an
/// insert or update writes must satisfy it, and an upsert's the update rule too when it may
/// have updated rows.
fn check(
    plan: &MutatePlan,
    rule: Option<&Condition>,
    update_rule: Option<&Condition>,
    rules: &RowRules,
) -> Result<Option<Statement>, Error> {
    if !matches!(plan.mutation, Mutation::Insert { .. } | Mutation::Update { .. }) {
        return Ok(None);
    }
    let merging = matches!(&plan.mutation, Mutation::Insert { on_conflict: Some(c), .. } if c.merge);
    let both;
    let rule = match (rule, update_rule.filter(|_| merging)) {
        (Some(i), Some(u)) => {
            both =
                Condition::Logic { negated: false, op: LogicOp::And, children: vec![i.clone(), u.clone()] };
            Some(&both)
        }
        (r, u) => r.or(u),
    };
    let Some(rule) = rule else { return Ok(None) };
    let mut p = Ctx::new(rules);
    let mut text = String::from("SELECT count(*)");
    source(&plan.relation.name.name, 0, &mut text);
    text.push_str(" WHERE rowid IN (SELECT value FROM json_each(");
    p.push(&mut text, String::new());
    text.push_str(")) AND NOT coalesce((");
    condition(rule, &mut text, &mut p)?;
    text.push_str("), 0)");
    Ok(Some(Statement { text, params: p.values }))
}

/// The primary key values of the first row inserted (rowids in `?1`), for `Location`: only a
/// row the caller may read is named (its select rule, as for a representation).
fn location(plan: &MutatePlan, rules: &RowRules) -> Result<Option<Statement>, Error> {
    let (Returning::Location(pk), Mutation::Insert { .. }) = (&plan.returning, &plan.mutation) else {
        return Ok(None);
    };
    if pk.is_empty() {
        return Ok(None);
    }
    let table = plan.relation.name.name.as_str();
    let mut text = String::from("SELECT json_array(");
    for (i, c) in pk.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str("CAST(");
        push_ident(&mut text, c);
        text.push_str(" AS TEXT)");
    }
    text.push_str(") FROM ");
    push_ident(&mut text, table);
    text.push_str(" WHERE rowid = (SELECT value FROM json_each(?1) LIMIT 1)");
    let mut p = Ctx::new(rules);
    p.values.push(String::new());
    p.rule(table, &mut text)?;
    Ok(Some(Statement { text, params: p.values }))
}

/// PostgreSQL's 42P10 for an `on_conflict` target that is not the primary key or a unique
/// key: SQLite would refuse the statement in its own words.
fn unique_target(relation: &crate::schema::Relation, target: &[String]) -> Rendered {
    let same = |key: &Vec<String>| key.len() == target.len() && key.iter().all(|k| target.contains(k));
    if same(&relation.primary_key) || relation.unique_keys.iter().any(same) {
        return Ok(());
    }
    Err(Error::sql(
        sqlstate::INVALID_COLUMN_REFERENCE,
        "there is no unique or exclusion constraint matching the ON CONFLICT specification",
        false,
    ))
}

/// PostgreSQL's 22P02 for text (a CSV or form body) sent for a JSON column that is no JSON:
/// SQLite's `json()` would refuse it in its own words, or take JSON5 PostgreSQL refuses.
fn json_text_valid(plan: &MutatePlan, payload: &Payload) -> Rendered {
    let json_columns: Vec<&str> =
        plan.relation.columns.iter().filter(|c| c.kind == ValueKind::Json).map(|c| c.name.as_str()).collect();
    if !payload.textual || json_columns.is_empty() {
        return Ok(());
    }
    let rows: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(&payload.json).unwrap_or_default();
    let invalid = rows.iter().flat_map(|row| json_columns.iter().filter_map(|c| row.get(*c))).any(|v| {
        matches!(v, serde_json::Value::String(text)
            if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err())
    });
    match invalid {
        true => Err(Error::sql(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            "invalid input syntax for type json",
            false,
        )),
        false => Ok(()),
    }
}

/// PUT: only a body row whose key is the URL's is written (else nothing is, and the request
/// fails with PGRST115).
fn put_matches(sql: &mut String, params: &mut Ctx<'_>, put_key: &[(String, String)]) {
    for (column, value) in put_key {
        sql.push_str(" AND CAST((pgrst_body.value ->> ");
        params.push(sql, column.clone());
        sql.push_str(") AS TEXT) = ");
        params.push(sql, value.clone());
    }
}

/// How many body rows of an upsert have no row with their conflict target's values yet.
fn inserts_of(
    table: &str,
    payload: &Payload,
    conflict: &OnConflict,
    put_key: &[(String, String)],
    rules: &RowRules,
) -> Result<Statement, Error> {
    let mut p = Ctx::new(rules);
    let mut text = String::from("SELECT count(*) FROM json_each(");
    p.push(&mut text, payload.json.clone());
    text.push_str(") AS pgrst_body WHERE true");
    put_matches(&mut text, &mut p, put_key);
    text.push_str(" AND NOT EXISTS (SELECT 1 FROM ");
    push_ident(&mut text, table);
    text.push_str(" AS pgrst_t WHERE true");
    for c in &conflict.target {
        text.push_str(" AND pgrst_t.");
        push_ident(&mut text, c);
        text.push_str(" = (pgrst_body.value ->> ");
        p.push(&mut text, c.clone());
        text.push(')');
    }
    text.push(')');
    Ok(Statement { text, params: p.values })
}

/// A body object's value for a column: its SQL value (`->>`: JSON true is 1), or for JSON
/// columns its JSON text (`->`).
/// How a body's value becomes a column's.
#[derive(Clone, Copy)]
enum BodyValue {
    /// A JSON value: its SQL value (`->>`: strings as text, numbers as numbers, booleans 1/0).
    Sql,
    /// A JSON value into a JSON column: the JSON itself.
    Json,
    /// Text (CSV, form) read as PostgreSQL reads a boolean's input.
    TextBool,
    /// Text into a JSON column: parsed as JSON.
    TextJson,
}

fn value_kind(plan: &MutatePlan, column: &str, textual: bool) -> BodyValue {
    let kind = plan.relation.column(column).map(|c| c.kind);
    match (kind, textual) {
        (Some(ValueKind::Json), false) => BodyValue::Json,
        (Some(ValueKind::Json), true) => BodyValue::TextJson,
        (Some(ValueKind::Bool), true) => BodyValue::TextBool,
        _ => BodyValue::Sql,
    }
}

fn body_value(sql: &mut String, params: &mut Ctx<'_>, object: &str, key: &str, kind: BodyValue) {
    let get = |sql: &mut String, params: &mut Ctx<'_>, op: &str| {
        sql.push('(');
        sql.push_str(object);
        sql.push_str(op);
        params.push(sql, key.to_owned());
        sql.push(')');
    };
    match kind {
        BodyValue::Sql => get(sql, params, " ->> "),
        BodyValue::Json => get(sql, params, " -> "),
        BodyValue::TextJson => {
            sql.push_str("json(");
            get(sql, params, " ->> ");
            sql.push(')');
        }
        BodyValue::TextBool => {
            // PostgreSQL's boolean input words; anything else is stored as sent (SQLite's
            // flexible typing, as for any other mistyped value).
            sql.push_str("(SELECT CASE lower(trim(pgrst_v)) WHEN 't' THEN 1 WHEN 'true' THEN 1 WHEN 'y' THEN 1 \
                WHEN 'yes' THEN 1 WHEN 'on' THEN 1 WHEN '1' THEN 1 WHEN 'f' THEN 0 WHEN 'false' THEN 0 \
                WHEN 'n' THEN 0 WHEN 'no' THEN 0 WHEN 'off' THEN 0 WHEN '0' THEN 0 ELSE pgrst_v END FROM (SELECT ");
            get(sql, params, " ->> ");
            sql.push_str(" AS pgrst_v))");
        }
    }
}

/// Writes the WHERE clause that selects a write's rows.
type RowSelection<'a> = dyn Fn(&mut String, &mut Ctx<'_>) -> Rendered + 'a;

/// The representation of the rows written (rowids in `?1`), or of those `rows` selects, as the
/// read rules let the caller see them.
fn representation(
    plan: &MutatePlan,
    rules: &RowRules,
    rows: Option<&RowSelection<'_>>,
) -> Result<Option<Statement>, Error> {
    let Returning::Representation(columns) = &plan.returning else { return Ok(None) };
    let table = plan.relation.name.name.as_str();
    let mut p = Ctx::new(rules);
    if rows.is_none() {
        p.values.push(String::new()); // ?1: the rowids written
    }
    let mut text =
        String::from("SELECT coalesce(json_group_array(json(pgrst_row)), '[]'), count(*) FROM (SELECT ");
    object(columns, &mut text, &mut p)?;
    text.push_str(" AS pgrst_row");
    source(table, 0, &mut text);
    match rows {
        None => text.push_str(" WHERE pgrst_0.rowid IN (SELECT value FROM json_each(?1))"),
        Some(rows) => rows(&mut text, &mut p)?,
    }
    for c in &plan.output_conditions {
        text.push_str(" AND ");
        condition(c, &mut text, &mut p)?;
    }
    p.rule(table, &mut text)?;
    if plan.order.is_empty() {
        text.push_str(" ORDER BY pgrst_0.rowid)");
    } else {
        super::read::order_by(&plan.order, &mut text, &mut p)?;
        text.push_str(", pgrst_0.rowid)");
    }
    Ok(Some(Statement { text, params: p.values }))
}
