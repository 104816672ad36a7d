//! A function call as a read's row source (its arguments from the query string, a JSON body or
//! a raw one), and the bodies media type handlers make of a read's rows.

use super::filter::array_literal;
use super::read::{aliased_list, group_by, grouped_order_by, window, ReadStatements, RowShape};
use super::{push_ident, push_qualified, Params, Statement};
use crate::plan::{ArgValue, Call, CallArgs, Handler, OutputColumn, ReadPlan, ResultShape, SCALAR_COLUMN};
use crate::schema::FunctionArg;

/// A read whose body a media type handler makes: the aggregate over the page's rows (each a
/// record of the output columns, cast to the relation's row type when the aggregate takes it),
/// or the function's own value; as bytes or text, and the number of rows.
pub(super) fn handler_read(
    plan: &ReadPlan,
    handler: &Handler,
    from_where: String,
    mut params: Params,
) -> ReadStatements {
    let mut inner = String::with_capacity(128 + from_where.len());
    inner.push_str("SELECT ");
    aliased_list(&plan.columns, &mut inner, &mut params);
    inner.push_str(&from_where);
    group_by(&plan.columns, Some(0), &mut inner, &mut params);
    grouped_order_by(&plan.order, &plan.columns, Some(0), &mut inner, &mut params);
    window(plan.window, &mut inner);
    let scalar = matches!(plan.result, ResultShape::Scalar | ResultShape::ScalarSet);
    let mut text = String::with_capacity(2 * inner.len() + 128);
    text.push_str("SELECT ");
    handler_body(handler, &plan.columns, scalar, &mut text);
    text.push_str(", pg_catalog.count(*)");
    if plan.count.is_some() {
        // The total, by the same conditions (and parameters); counted exactly whatever the
        // preference: the handler's one row leaves no room for the planner's estimate.
        text.push_str(", (SELECT pg_catalog.count(*) FROM (SELECT 1");
        text.push_str(&from_where);
        text.push_str(") pgrst_c)");
    }
    text.push_str(" FROM (");
    text.push_str(&inner);
    text.push_str(") pgrst_h");
    ReadStatements {
        main: Statement { text, params: params.0 },
        counted: false,
        shape: RowShape::Handler,
        explain: None,
        estimate_threshold: None,
    }
}

/// The body a media type handler makes of the rows `pgrst_h` (records of the output `columns`):
/// the aggregate over them (cast to the relation's row type when the aggregate takes it; a
/// `scalar` call's values themselves), or the function's own value; as bytes or text.
pub(crate) fn handler_body(handler: &Handler, columns: &[OutputColumn], scalar: bool, sql: &mut String) {
    let first_key = columns.iter().find(|c| c.is_output()).map_or(SCALAR_COLUMN, |c| c.key.as_str());
    match &handler.aggregate {
        Some(aggregate) => {
            push_qualified(sql, aggregate);
            sql.push_str("(pgrst_h");
            if scalar {
                sql.push('.');
                push_ident(sql, first_key);
            } else if let Some(row_type) = &handler.row_type {
                sql.push_str("::");
                push_qualified(sql, row_type);
            }
            sql.push(')');
        }
        None => {
            sql.push_str("(pg_catalog.array_agg(pgrst_h.");
            push_ident(sql, first_key);
            sql.push_str("))[1]");
        }
    }
    sql.push_str(if handler.binary { "::bytea" } else { "::text" });
}

/// A function call as a row source: `(SELECT pgrst_call.* FROM fn(args) AS pgrst_call)`. The
/// subquery hides the unpacked arguments' columns, whose names may be the result's too.
pub(super) fn call_source(call: &Call, sql: &mut String, params: &mut Params) {
    sql.push_str("(SELECT pgrst_call.* FROM ");
    let function = |sql: &mut String| {
        push_qualified(sql, &call.function);
        sql.push('(');
    };
    let named = |sql: &mut String, i: usize, arg: &FunctionArg| {
        if i > 0 {
            sql.push_str(", ");
        }
        if arg.variadic {
            sql.push_str("VARIADIC ");
        }
        push_ident(sql, &arg.name);
        sql.push_str(" := ");
    };
    match &call.args {
        CallArgs::Text(values) => {
            function(sql);
            for (i, (arg, value)) in values.iter().enumerate() {
                named(sql, i, arg);
                match value {
                    ArgValue::One(v) => params.push(sql, v.clone()),
                    ArgValue::Many(items) => params.push(sql, array_literal(items)),
                }
                sql.push_str("::");
                sql.push_str(&arg.type_name);
            }
        }
        CallArgs::Json { payload, args } => {
            // A function's one unnamed parameter is the body's `""` key, passed by position
            // (first); the others by name, unpacked by `json_to_record`.
            let (unnamed, named_args): (Vec<&FunctionArg>, Vec<&FunctionArg>) =
                args.iter().partition(|a| a.name.is_empty());
            sql.push_str("json_to_record((");
            params.push(sql, payload.clone());
            sql.push_str("::json) -> 0) AS pgrst_args(");
            for (i, arg) in named_args.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                push_ident(sql, &arg.name);
                sql.push(' ');
                sql.push_str(&arg.type_name);
            }
            if named_args.is_empty() {
                // A column definition list cannot be empty.
                sql.push_str("pgrst_none text");
            }
            sql.push_str("), LATERAL ");
            function(sql);
            for (i, arg) in unnamed.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                let json = matches!(arg.type_name.as_str(), "json" | "jsonb");
                sql.push_str("(((");
                params.push(sql, payload.clone());
                sql.push_str(if json { "::json) -> 0) -> '')::" } else { "::json) -> 0) ->> '')::" });
                sql.push_str(&arg.type_name);
            }
            for (i, arg) in named_args.iter().enumerate() {
                named(sql, i + unnamed.len(), arg);
                sql.push_str("pgrst_args.");
                push_ident(sql, &arg.name);
            }
        }
        CallArgs::Body { payload, type_name } => {
            function(sql);
            params.push(sql, payload.clone());
            sql.push_str("::");
            sql.push_str(type_name);
        }
    }
    sql.push_str(") AS pgrst_call");
    if call.scalar {
        sql.push('(');
        sql.push_str(SCALAR_COLUMN);
        sql.push(')');
    }
    sql.push(')');
}
