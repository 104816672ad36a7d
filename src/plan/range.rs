//! The rows a read returns: the `Range` header intersected with `limit`/`offset`, capped by
//! `db-max-rows`, as PostgREST computes it.

use rowgate_request::{ApiRequest, Method};

use crate::error::Error;

/// The rows asked for: skip `offset`, then at most `limit` (all when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowWindow {
    /// Rows skipped.
    pub offset: u64,
    /// Most rows returned.
    pub limit: Option<u64>,
}

/// Computes the window of the top-level rows. HEAD ignores the `Range` header, as PostgREST does.
pub fn window(request: &ApiRequest, max_rows: Option<u64>) -> Result<RowWindow, Error> {
    // `lower` is the first row, `end` one past the last (None: unbounded).
    let (mut lower, mut end) = (0u64, None::<u64>);
    if request.method == Method::Get {
        if let Some(r) = request.range_header {
            lower = r.first;
            end = r.last.map(|l| l.saturating_add(1));
        }
    }
    if let Some((_, lo)) = request.query.ranges.iter().find(|(p, _)| p.is_empty()) {
        let offset = lo.offset.unwrap_or(0);
        lower = lower.max(offset);
        if let Some(limit) = lo.limit {
            let q_end = offset.saturating_add(limit);
            end = Some(end.map_or(q_end, |e| e.min(q_end)));
        }
    }
    if let Some(max) = max_rows {
        let cap = lower.saturating_add(max);
        end = Some(end.map_or(cap, |e| e.min(cap)));
    }
    Ok(RowWindow { offset: lower, limit: end.map(|e| e.saturating_sub(lower)) })
}
