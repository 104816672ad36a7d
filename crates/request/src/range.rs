//! The `Range` header and `limit`/`offset` parameters, as PostgREST's `RangeQuery` and
//! `getRanges`.

use crate::cursor::Cursor;
use crate::field::tree_path;
use crate::{EmbedPath, LimitOffset, Method, RequestError, RowRange};

/// PostgREST's PGRST103 details when a `Range` header has first > last.
pub(crate) const LOWER_GT_UPPER: &str =
    "The lower boundary must be lower than or equal to the upper boundary in the Range header.";
/// PostgREST's PGRST103 details for a negative limit (and an empty limit/Range overlap).
pub(crate) const NEGATIVE_LIMIT: &str = "Limit should be greater than or equal to zero.";

/// Parses `Range: first-[last]` (no unit prefix, as PostgREST's `^([0-9]+)-([0-9]*)$`).
/// Anything else is ignored, first > last is PGRST103.
pub(crate) fn parse_range_header(value: &str) -> Result<Option<RowRange>, RequestError> {
    let Some((first, last)) = value.split_once('-') else {
        return Ok(None);
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if first.is_empty() || !all_digits(first) || !all_digits(last) {
        return Ok(None);
    }
    // Numbers beyond u64 cannot be real row positions; ignoring them is the lenient choice.
    let Ok(first) = first.parse::<u64>() else {
        return Ok(None);
    };
    let last = if last.is_empty() {
        None
    } else {
        match last.parse::<u64>() {
            Ok(l) => Some(l),
            Err(_) => return Ok(None),
        }
    };
    if last.is_some_and(|l| l < first) {
        return Err(RequestError::InvalidRange { details: LOWER_GT_UPPER.to_string() });
    }
    Ok(Some(RowRange { first, last }))
}

/// A `limit`/`offset` value: PostgREST's `readMaybe`, so non-integers are ignored.
fn read_integer(value: &str) -> Option<i128> {
    let v = value.trim();
    // Haskell's `read` has no leading `+`; Rust's `parse` would accept one.
    if v.starts_with('+') {
        return None;
    }
    v.parse::<i128>().ok()
}

/// Which of the two a parameter sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeParam {
    /// `limit=`.
    Limit,
    /// `offset=`.
    Offset,
}

/// Records one `[path.]limit=` / `[path.]offset=` parameter; the last one per path wins.
pub(crate) fn add_range_param(
    ranges: &mut Vec<(EmbedPath, LimitOffset)>,
    which: RangeParam,
    key: &str,
    value: &str,
) -> Result<(), RequestError> {
    let (path, _) = tree_path(&mut Cursor::new(key)).map_err(|e| e.into_request_error("tree path", key))?;
    let Some(n) = read_integer(value) else {
        return Ok(());
    };
    let n = match u64::try_from(n) {
        Ok(n) => n,
        Err(_) if n > 0 => u64::MAX,
        // PostgREST 12 ignores a negative offset (its parser takes only digits there).
        Err(_) if which == RangeParam::Offset => return Ok(()),
        Err(_) => return Err(RequestError::InvalidRange { details: NEGATIVE_LIMIT.to_string() }),
    };
    let idx = match ranges.iter().position(|(p, _)| *p == path) {
        Some(i) => i,
        None => {
            ranges.push((path, LimitOffset::default()));
            ranges.len() - 1
        }
    };
    if let Some((_, lo)) = ranges.get_mut(idx) {
        match which {
            RangeParam::Limit => lo.limit = Some(n),
            RangeParam::Offset => lo.offset = Some(n),
        }
    }
    Ok(())
}

/// PostgREST intersects the top-level `limit`/`offset` with the `Range` header (GET only)
/// and rejects an empty result unless it comes from `limit=0`.
pub(crate) fn check_top_level(
    method: Method,
    header: Option<RowRange>,
    top: Option<LimitOffset>,
) -> Result<(), RequestError> {
    let (Method::Get, Some(h), Some(lo)) = (method, header, top) else {
        return Ok(());
    };
    if lo.limit == Some(0) {
        return Ok(());
    }
    let lo_first = lo.offset.unwrap_or(0);
    let lo_last = lo.limit.map(|l| lo_first.saturating_add(l).saturating_sub(1));
    let first = h.first.max(lo_first);
    let last = match (h.last, lo_last) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if last.is_some_and(|l| l < first) {
        return Err(RequestError::InvalidRange { details: NEGATIVE_LIMIT.to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_headers() {
        let r = |first, last| Ok(Some(RowRange { first, last }));
        let cases: Vec<(&str, Result<Option<RowRange>, RequestError>)> = vec![
            ("0-9", r(0, Some(9))),
            ("10-", r(10, None)),
            ("5-5", r(5, Some(5))),
            ("items=0-9", Ok(None)),
            ("-5", Ok(None)),
            ("a-b", Ok(None)),
            ("0-9,20-30", Ok(None)),
            ("", Ok(None)),
            ("99999999999999999999999-", Ok(None)),
            ("9-0", Err(RequestError::InvalidRange { details: LOWER_GT_UPPER.into() })),
        ];
        for (input, want) in cases {
            assert_eq!(parse_range_header(input), want, "input {input:?}");
        }
    }

    #[test]
    fn limits_and_offsets() {
        let mut ranges = Vec::new();
        add_range_param(&mut ranges, RangeParam::Limit, "limit", "10").unwrap();
        add_range_param(&mut ranges, RangeParam::Offset, "offset", "5").unwrap();
        add_range_param(&mut ranges, RangeParam::Limit, "actors.limit", "2").unwrap();
        add_range_param(&mut ranges, RangeParam::Limit, "limit", "abc").unwrap();
        add_range_param(&mut ranges, RangeParam::Limit, "actors.limit", "3").unwrap();
        assert_eq!(
            ranges,
            vec![
                (vec![], LimitOffset { limit: Some(10), offset: Some(5) }),
                (vec!["actors".to_string()], LimitOffset { limit: Some(3), offset: None }),
            ]
        );
        let err = add_range_param(&mut ranges, RangeParam::Limit, "limit", "-1").unwrap_err();
        assert_eq!(err, RequestError::InvalidRange { details: NEGATIVE_LIMIT.into() });
        // A negative offset is ignored, as PostgREST 12 ignores it.
        let before = ranges.clone();
        add_range_param(&mut ranges, RangeParam::Offset, "offset", "-1").unwrap();
        assert_eq!(ranges, before);
        assert!(add_range_param(&mut ranges, RangeParam::Limit, "@.limit", "1").is_err());
    }

    #[test]
    fn top_level_overlap() {
        let h = |first, last| Some(RowRange { first, last });
        let lo = |limit, offset| Some(LimitOffset { limit, offset });
        assert!(check_top_level(Method::Get, h(10, Some(20)), lo(Some(5), None)).is_err());
        assert!(check_top_level(Method::Get, h(0, Some(20)), lo(Some(5), None)).is_ok());
        assert!(check_top_level(Method::Get, h(10, None), lo(Some(0), None)).is_ok());
        assert!(check_top_level(Method::Get, h(10, None), lo(None, Some(50))).is_ok());
        assert!(check_top_level(Method::Post, h(10, Some(20)), lo(Some(5), None)).is_ok());
    }
}
