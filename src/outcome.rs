//! What a request's statements did, as data: what crosses the backend seam. A backend returns
//! an [`Outcome`] — the rows it rendered and their counts, what a write changed, what SQL set
//! in `response.*`, where the write left the primary — and a front door (the REST API's
//! response stage, `response::rest`) makes its API's answer of it. No HTTP here: the same
//! outcome can feed another API's shape.
//!
//! The checks that refuse an answer (max-affected, singular, PUT's one row) are here too, as
//! pure functions of the plan and the counts: a backend runs them before COMMIT, so that a
//! refused answer rolls its transaction back.

use crate::error::{code, Error};
use crate::plan::{Media, MutatePlan, ReadPlan, Returning};

/// What a request's statements did.
#[derive(Debug)]
pub struct Outcome {
    /// The rows read, the write done, or the plan explained.
    pub done: Done,
    /// What SQL left in `response.headers` and `response.status`.
    pub set_by_sql: SetBySql,
    /// With read replicas: the primary's WAL position after a write (or a call that may have
    /// written), so the client's next reads go where it has been replayed.
    pub written_at: Option<u64>,
    /// Read on a replica that may lag the primary (by up to `db-replica-max-lag`): never a
    /// current answer for the response cache.
    pub may_lag: bool,
}

/// The result of the statements.
#[derive(Debug)]
pub enum Done {
    /// A read, or a function's result.
    Read(Rows),
    /// A write.
    Written(Written),
    /// `Accept: application/vnd.pgrst.plan`: the database's plan of the statement.
    Explained(Explained),
}

/// The rows of a read.
#[derive(Debug, Default)]
pub struct Rows {
    /// Rows in the page.
    pub page: u64,
    /// Rows in all, when counted.
    pub total: Option<u64>,
    /// The page rendered in the plan's media; empty when the range is past the total
    /// ([`out_of_range`]) and for HEAD.
    pub body: Vec<u8>,
}

/// What a write did.
#[derive(Debug, Default)]
pub struct Written {
    /// Rows written.
    pub affected: u64,
    /// Of which inserted (a merging upsert may update instead).
    pub inserted: u64,
    /// Rows in the representation, if one was asked for.
    pub page: u64,
    /// The inserted row's primary key values (`Prefer: return=headers-only`), for its location.
    pub key: Option<Vec<Option<String>>>,
    /// The representation, rendered in the plan's media, if one was asked for.
    pub body: Option<Vec<u8>>,
}

/// The database's plan of a statement.
#[derive(Debug)]
pub struct Explained {
    /// The media type asked for (`application/vnd.pgrst.plan+json; for="..."; options=...`).
    pub content_type: String,
    /// The plan, one line per line of EXPLAIN's output (or its JSON).
    pub text: String,
}

/// `response.headers` and `response.status` as SQL left them (`set_config(.., true)`): a
/// function, a trigger or the pre-request function. Applied over the answer after the
/// transaction, as PostgREST does, so a write stands even when they are invalid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetBySql {
    /// `response.headers`, unless unset or empty.
    pub headers: Option<String>,
    /// `response.status`, unless unset or empty.
    pub status: Option<String>,
}

impl Outcome {
    /// An outcome of the statements alone: nothing set by SQL, read on the primary.
    pub fn of(done: Done) -> Outcome {
        Outcome { done, set_by_sql: SetBySql::default(), written_at: None, may_lag: false }
    }
}

/// Whether a read's range starts past its counted total (416 PGRST103, which PostgREST answers
/// with the transaction committed).
pub fn out_of_range(plan: &ReadPlan, total: Option<u64>) -> bool {
    total.is_some_and(|t| plan.window.offset > t)
}

/// The rows of a read of `page` rows (of `total`, when counted), with the body `render` makes:
/// refused past `max-affected` (a function's rows count as a write's, PGRST124), and a singular
/// HEAD for other than one row (406, as GET would answer). Not rendered when the range is past
/// the total.
pub fn rows(
    plan: &ReadPlan,
    page: u64,
    total: Option<u64>,
    render: impl FnOnce() -> Result<Vec<u8>, Error>,
) -> Result<Rows, Error> {
    if let Some(max) = plan.transaction.and_then(|t| t.max_affected) {
        if page > max {
            return Err(Error::max_affected(page));
        }
    }
    if out_of_range(plan, total) {
        return Ok(Rows { page, total, body: Vec::new() });
    }
    let body = render()?;
    if plan.head && plan.media == (Media::Single { strip_nulls: false }) && page != 1 {
        return Err(singular(page));
    }
    Ok(Rows { page, total, body: if plan.head { Vec::new() } else { body } })
}

/// What a write did, with the representation `render` makes when one was asked for: refused
/// when a PUT did not write exactly one row, past `max-affected`, and when a singular answer
/// is not one row.
pub fn written(
    plan: &MutatePlan,
    mut written: Written,
    render: impl FnOnce() -> Result<Vec<u8>, Error>,
) -> Result<Written, Error> {
    if plan.is_put() && written.affected != 1 {
        return Err(crate::plan::put_mismatch());
    }
    if let Some(max) = plan.max_affected {
        if written.affected > max {
            return Err(Error::max_affected(written.affected));
        }
    }
    let representation = matches!(plan.returning, Returning::Representation(_));
    if matches!(plan.media, Media::Single { .. }) {
        let n = if representation { written.page } else { written.affected };
        if n != 1 {
            return Err(singular(n));
        }
    }
    if representation {
        written.body = Some(render()?);
    }
    Ok(written)
}

/// 406 PGRST116: a singular answer (`vnd.pgrst.object+json`) for other than one row.
pub fn singular(rows: u64) -> Error {
    Error::Api {
        code: code::SINGULAR,
        message: "Cannot coerce the result to a single JSON object".into(),
        details: Some(format!("The result contains {rows} rows").into()),
        hint: None,
    }
}
