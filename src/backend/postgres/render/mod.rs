//! PostgreSQL's rows → the outcome's body: JSON written here from the rows' binary values,
//! byte for byte as PostgreSQL's `json_agg` writes it (rows joined by `", \n "`, values as
//! `to_json` renders them), so a client cannot tell rowgate's body from PostgREST's; CSV as
//! PostgREST writes it; and EXPLAIN output for `Accept: application/vnd.pgrst.plan`. The
//! counts go with it ([`crate::outcome`]); status and headers are the front door's.

mod json;

use rowgate_request::PreferCount;

use super::sql::{ReadStatements, Render, RowShape, WriteStatements};
use super::{RawValue, ReadResult, WriteResult};
use crate::error::Error;
use crate::outcome::{self, singular, Explained, Rows, Written};
use crate::plan::{Media, MutatePlan, ReadPlan, ResultShape, Returning};

/// The rows of a read, checked ([`outcome::rows`]).
pub fn read(
    plan: &ReadPlan,
    stmts: &ReadStatements,
    result: ReadResult,
    max_rows: Option<u64>,
) -> Result<Rows, Error> {
    let rows = &result.rows;
    if stmts.shape == RowShape::Handler {
        // One row: the handler's body (bytes, or NULL for none), the rows it read, the total.
        let row = rows.first();
        let total = plan.count.and(row).map(|r| count(r, 2));
        return outcome::rows(plan, row.map_or(0, |r| count(r, 1)), total, || Ok(handler_body(row, 0)));
    }
    // With an exact count the first column is the total and the second marks a real row.
    let (skip, total) = if stmts.counted {
        let total = rows.first().map_or(0, |r| r.get::<_, i64>(0)).max(0) as u64;
        (2, Some(total))
    } else {
        (0, None)
    };
    let page: Vec<&tokio_postgres::Row> = if stmts.counted {
        rows.iter().filter(|r| r.get::<_, Option<i32>>(1).is_some()).collect()
    } else {
        rows.iter().collect()
    };
    let total = match plan.count {
        Some(PreferCount::Planned) => planned_count(result.explain.as_deref()),
        // PostgREST's rule, quirk included: past `db-max-rows`, or with no `db-max-rows` at
        // all, the larger of the (capped) exact count and the planner's estimate.
        Some(PreferCount::Estimated) => match (total, max_rows) {
            (Some(t), max) if max.is_none_or(|max| t > max) => {
                Some(planned_count(result.explain.as_deref()).map_or(t, |p| p.max(t)))
            }
            _ => total,
        },
        _ => total,
    };

    let n = page.len() as u64;
    outcome::rows(plan, n, total, || body(&stmts.shape, plan.media, plan.result, &page, skip))
}

/// The body of `page` in `media`: 406 PGRST116 for a singular response of other than one
/// row; 503 when a value's type is not the one the schema cache knew.
fn body(
    shape: &RowShape,
    media: Media,
    result: ResultShape,
    page: &[&tokio_postgres::Row],
    skip: usize,
) -> Result<Vec<u8>, Error> {
    if let (RowShape::Json { columns }, Some(row)) = (shape, page.first()) {
        // Values are rendered by the type the schema cache knew; a migration may have changed
        // it since. Never guess: refuse, and let the caller retry once the cache is reloaded.
        let actual = &row.columns()[skip..];
        if actual.len() != columns.len()
            || !columns.iter().zip(actual).all(|((_, render), col)| render.accepts(col.type_()))
        {
            return Err(Error::SchemaChanged);
        }
    }
    let value = |out: &mut Vec<u8>, render: Render, row: &tokio_postgres::Row| match row
        .get::<_, Option<RawValue>>(skip)
    {
        Some(RawValue(raw)) => json::write_value(out, render, raw),
        None => out.extend_from_slice(b"null"),
    };
    Ok(match (shape, media) {
        (RowShape::Empty | RowShape::Handler, _) => Vec::new(),
        (_, _) if result == ResultShape::Void => Vec::new(),
        (RowShape::Json { columns }, _) if result == ResultShape::Scalar => {
            let mut out = Vec::with_capacity(64);
            match page.first() {
                Some(row) => value(&mut out, columns[0].1, row),
                None => out.extend_from_slice(b"null"),
            }
            out
        }
        (RowShape::Json { columns }, _) if result == ResultShape::ScalarSet => {
            let mut out = Vec::with_capacity(16 + page.len() * 16);
            out.push(b'[');
            for (i, row) in page.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                value(&mut out, columns[0].1, row);
            }
            out.push(b']');
            out
        }
        (RowShape::Json { columns }, Media::Json { strip_nulls }) if result == ResultShape::Object => {
            let mut out = Vec::with_capacity(256);
            match page.first() {
                Some(row) => json::write_row(&mut out, &json::Keys::new(columns), row, skip, strip_nulls),
                None => out.extend_from_slice(b"null"),
            }
            out
        }
        (RowShape::Json { columns }, Media::Single { strip_nulls }) => {
            if page.len() != 1 {
                return Err(singular(page.len() as u64));
            }
            let keys = json::Keys::new(columns);
            let mut out = Vec::with_capacity(256);
            json::write_row(&mut out, &keys, page[0], skip, strip_nulls);
            out
        }
        (RowShape::Json { columns }, media) => {
            let strip_nulls = media == Media::Json { strip_nulls: true };
            // json_strip_nulls(json_agg(...)) rewrites PostgREST's separators compactly.
            let separator: &[u8] = if strip_nulls { b"," } else { b", \n " };
            let keys = json::Keys::new(columns);
            let mut out = Vec::with_capacity(64 + page.len() * 256);
            out.push(b'[');
            for (i, row) in page.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(separator);
                }
                json::write_row(&mut out, &keys, row, skip, strip_nulls);
            }
            out.push(b']');
            out
        }
        (RowShape::Csv { columns }, _) => csv(columns, page, skip),
        (RowShape::GeoJson, _) => {
            // json_build_object's spacing, as PostgREST's body.
            let mut out = Vec::with_capacity(64 + page.len() * 256);
            out.extend_from_slice(br#"{"type" : "FeatureCollection", "features" : ["#);
            for (i, row) in page.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                match row.get::<_, Option<RawValue>>(skip) {
                    Some(RawValue(raw)) => out.extend_from_slice(raw),
                    None => out.extend_from_slice(b"null"),
                }
            }
            out.extend_from_slice(b"]}");
            out
        }
    })
}

/// What a write whose statement ran did, checked ([`outcome::written`]); an error here rolls it
/// back.
pub fn write(plan: &MutatePlan, stmts: &WriteStatements, result: &WriteResult) -> Result<Written, Error> {
    let rows = &result.rows;
    let (affected, inserted) = match (stmts.returns_rows, rows.first()) {
        (true, Some(r)) => (r.get::<_, i64>(0).max(0) as u64, r.get::<_, i64>(1).max(0) as u64),
        (true, None) => (0, 0),
        (false, _) => (result.affected, result.affected),
    };
    if stmts.shape == RowShape::Handler {
        // One row: the counts, the handler's body (bytes, or NULL for none), the rows it read.
        let row = rows.first();
        let written =
            Written { affected, inserted, page: row.map_or(0, |r| count(r, 4)), ..Written::default() };
        return outcome::written(plan, written, || Ok(handler_body(row, 3)));
    }
    let page: Vec<&tokio_postgres::Row> = if stmts.returns_rows {
        rows.iter().filter(|r| r.get::<_, Option<i32>>(2).is_some()).collect()
    } else {
        Vec::new()
    };
    let key = match (&plan.returning, page.first()) {
        (Returning::Location(pk), Some(row)) => Some((0..pk.len()).map(|i| row.get(3 + i)).collect()),
        _ => None,
    };
    let written = Written { affected, inserted, page: page.len() as u64, key, body: None };
    outcome::written(plan, written, || body(&stmts.shape, plan.media, ResultShape::Rows, &page, 3))
}

/// The answer to `Accept: application/vnd.pgrst.plan`: PostgreSQL's EXPLAIN output.
pub fn plan(explain: &crate::plan::Explain, rows: &[tokio_postgres::Row]) -> Explained {
    // One text row per line, or one json value (whose binary form is its text).
    let lines: Vec<String> = rows
        .iter()
        .filter_map(|r| r.get::<_, Option<RawValue>>(0))
        .map(|RawValue(raw)| String::from_utf8_lossy(raw).into_owned())
        .collect();
    Explained { content_type: explain.content_type.clone(), text: lines.join("\n") }
}

/// The row estimate of the top plan node of `EXPLAIN (FORMAT JSON)` output.
fn planned_count(explain: Option<&str>) -> Option<u64> {
    let plan: serde_json::Value = serde_json::from_str(explain?).ok()?;
    // EXPLAIN (FORMAT JSON) is one array with one object per statement.
    plan.get(0)?.get("Plan")?.get("Plan Rows")?.as_f64().map(|r| r.max(0.0) as u64)
}

/// PostgREST's CSV: a header of the keys, then each row's record text without its
/// parentheses; an empty result has an empty header, as PostgREST takes the header from a row.
fn csv(columns: &[String], rows: &[&tokio_postgres::Row], skip: usize) -> Vec<u8> {
    crate::format::csv::document(columns, rows.len(), |i, out| {
        if let Some(RawValue(record)) = rows[i].get::<_, Option<RawValue>>(skip) {
            if record.len() >= 2 {
                out.extend_from_slice(&record[1..record.len() - 1]);
            }
        }
    })
}

/// The bytes of the body a media type handler made, in column `i` (none for NULL).
fn handler_body(row: Option<&tokio_postgres::Row>, i: usize) -> Vec<u8> {
    row.and_then(|r| r.get::<_, Option<RawValue>>(i)).map_or_else(Vec::new, |RawValue(b)| b.to_vec())
}

/// A `count(*)` in column `i`.
fn count(row: &tokio_postgres::Row, i: usize) -> u64 {
    row.get::<_, i64>(i).max(0) as u64
}
