//! The `Prefer` header (RFC 7240), as PostgREST's `Preferences.fromHeaders`: several headers
//! and/or comma-separated values, first occurrence of each preference wins.

use crate::{
    PreferCount, PreferHandling, PreferMissing, PreferResolution, PreferReturn, PreferTx, Preferences,
};

/// Parses every `prefer` header value, in order.
pub(crate) fn parse_preferences<'a>(values: impl Iterator<Item = &'a str>) -> Preferences {
    let mut p = Preferences::default();
    let mut seen_max_affected = false;
    for token in values.flat_map(|v| v.split(',')).map(str::trim) {
        // PostgREST would list an empty token (`a,,b`) as invalid; nobody means that.
        if token.is_empty() {
            continue;
        }
        // Only the first max-affected counts, even when it is no number (PostgREST's
        // `listStripPrefix` then `readMaybe`); it is never listed as invalid.
        if let Some(n) = token.strip_prefix("max-affected=") {
            if !seen_max_affected {
                seen_max_affected = true;
                p.max_affected = n.parse::<i64>().ok();
            }
            continue;
        }
        if !apply(&mut p, token) {
            p.invalid.push(token.to_string());
        }
    }
    p
}

/// Applies one preference if it is known (first value wins); false if it is not understood.
fn apply(p: &mut Preferences, token: &str) -> bool {
    fn set<T>(slot: &mut Option<T>, v: T) -> bool {
        if slot.is_none() {
            *slot = Some(v);
        }
        true
    }
    match token {
        "return=minimal" => set(&mut p.return_, PreferReturn::Minimal),
        "return=headers-only" => set(&mut p.return_, PreferReturn::HeadersOnly),
        "return=representation" => set(&mut p.return_, PreferReturn::Representation),
        "count=exact" => set(&mut p.count, PreferCount::Exact),
        "count=planned" => set(&mut p.count, PreferCount::Planned),
        "count=estimated" => set(&mut p.count, PreferCount::Estimated),
        "resolution=merge-duplicates" => set(&mut p.resolution, PreferResolution::MergeDuplicates),
        "resolution=ignore-duplicates" => set(&mut p.resolution, PreferResolution::IgnoreDuplicates),
        "missing=default" => set(&mut p.missing, PreferMissing::Default),
        "missing=null" => set(&mut p.missing, PreferMissing::Null),
        "handling=strict" => set(&mut p.handling, PreferHandling::Strict),
        "handling=lenient" => set(&mut p.handling, PreferHandling::Lenient),
        "tx=commit" => set(&mut p.tx, PreferTx::Commit),
        "tx=rollback" => set(&mut p.tx, PreferTx::Rollback),
        "patch=by-key" => {
            p.patch_by_key = true;
            true
        }
        // Deprecated but still accepted by PostgREST 12; rowgate has nothing to do for it.
        "params=single-object" => true,
        _ => {
            if let Some(tz) = token.strip_prefix("timezone=") {
                // Whether the zone exists is checked later against pg_timezone_names.
                set(&mut p.timezone, tz.to_string())
            } else {
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferences() {
        let cases: Vec<(Vec<&str>, Preferences)> = vec![
            (vec![], Preferences::default()),
            (
                vec!["resolution=ignore-duplicates, count=exact, timezone=America/Los_Angeles, max-affected=100"],
                Preferences {
                    resolution: Some(PreferResolution::IgnoreDuplicates),
                    count: Some(PreferCount::Exact),
                    timezone: Some("America/Los_Angeles".into()),
                    max_affected: Some(100),
                    ..Default::default()
                },
            ),
            (
                vec!["resolution=ignore-duplicates", "count=exact", "missing=null", "handling=lenient", "invalid"],
                Preferences {
                    resolution: Some(PreferResolution::IgnoreDuplicates),
                    count: Some(PreferCount::Exact),
                    missing: Some(PreferMissing::Null),
                    handling: Some(PreferHandling::Lenient),
                    invalid: vec!["invalid".into()],
                    ..Default::default()
                },
            ),
            (
                vec!["tx=commit, tx=rollback", "resolution=merge-duplicates"],
                Preferences {
                    tx: Some(PreferTx::Commit),
                    resolution: Some(PreferResolution::MergeDuplicates),
                    ..Default::default()
                },
            ),
            (
                vec!["count=exact,    tx=rollback   ,return=representation , missing=default, handling=strict, anything"],
                Preferences {
                    count: Some(PreferCount::Exact),
                    tx: Some(PreferTx::Rollback),
                    return_: Some(PreferReturn::Representation),
                    missing: Some(PreferMissing::Default),
                    handling: Some(PreferHandling::Strict),
                    invalid: vec!["anything".into()],
                    ..Default::default()
                },
            ),
            (
                vec!["return=minimal,return=headers-only,count=planned,count=estimated,params=single-object,,"],
                Preferences {
                    return_: Some(PreferReturn::Minimal),
                    count: Some(PreferCount::Planned),
                    ..Default::default()
                },
            ),
            (
                vec!["max-affected=x", "max-affected=5", "Return=Minimal"],
                Preferences { invalid: vec!["Return=Minimal".into()], ..Default::default() },
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse_preferences(input.iter().copied()), want, "input {input:?}");
        }
    }
}
