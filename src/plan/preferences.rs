//! `Prefer`: which preferences a request honours, for `Preference-Applied` (in PostgREST's
//! order), the time zone it runs in, and `handling=strict`'s 400 for invalid ones.

use rowgate_request::{PreferCount, PreferHandling, Preferences};

use crate::error::{code, Error};
use crate::schema::SchemaCache;

/// Validates the preferences a read honours and lists them for `Preference-Applied`:
/// `handling=strict` turns an invalid one into 400 PGRST122, otherwise it is ignored.
pub(super) fn preferences(
    prefs: &Preferences,
    schema: &SchemaCache,
) -> Result<(Option<String>, Vec<String>), Error> {
    let (timezone, invalid) = check_timezone(prefs, schema);
    reject_invalid(prefs, &invalid)?;
    // PostgREST's order: count, handling, timezone (the others do not apply to reads).
    let mut applied: Vec<String> = prefs.count.map(|c| count_name(c).to_owned()).into_iter().collect();
    applied_tail(&mut applied, None, prefs, &timezone, None);
    Ok((timezone, applied))
}

/// The end of `Preference-Applied` for writes and calls, in PostgREST's order: `tx` (when it
/// was honoured), `handling`, `timezone`, then `max-affected` (PostgREST 12.2).
pub(super) fn applied_tail(
    applied: &mut Vec<String>,
    tx: Option<bool>,
    prefs: &Preferences,
    timezone: &Option<String>,
    max_affected: Option<u64>,
) {
    if let Some(rollback) = tx {
        applied.push(if rollback { "tx=rollback" } else { "tx=commit" }.to_owned());
    }
    if let Some(h) = prefs.handling {
        applied.push(
            if h == PreferHandling::Strict { "handling=strict" } else { "handling=lenient" }.to_owned(),
        );
    }
    if let Some(tz) = timezone {
        applied.push(format!("timezone={tz}"));
    }
    if let Some(n) = max_affected {
        applied.push(format!("max-affected={n}"));
    }
}

/// The `Preference-Applied` spelling of a count preference.
pub(super) fn count_name(count: PreferCount) -> &'static str {
    match count {
        PreferCount::Exact => "count=exact",
        PreferCount::Planned => "count=planned",
        PreferCount::Estimated => "count=estimated",
    }
}

/// The requested time zone, and the preferences that are invalid (the unknown ones, and a
/// time zone where the database has none). As PostgREST 16, the value goes to the database
/// as it is, which decides (a name, an abbreviation, a POSIX offset such as `+05:30`); one it
/// refuses is its error (400 `22023`), whatever `handling` says.
pub(super) fn check_timezone(prefs: &Preferences, schema: &SchemaCache) -> (Option<String>, Vec<String>) {
    let mut invalid = prefs.invalid.clone();
    let timezone = match &prefs.timezone {
        Some(tz) if schema.time_zones => Some(tz.clone()),
        Some(tz) => {
            invalid.push(format!("timezone={tz}"));
            None
        }
        None => None,
    };
    (timezone, invalid)
}

/// With `handling=strict`, invalid preferences are 400 PGRST122; otherwise they are ignored.
pub(super) fn reject_invalid(prefs: &Preferences, invalid: &[String]) -> Result<(), Error> {
    if prefs.handling == Some(PreferHandling::Strict) && !invalid.is_empty() {
        return Err(Error::Api {
            code: code::INVALID_PREFERENCES,
            message: "Invalid preferences given with handling=strict".into(),
            details: Some(format!("Invalid preferences: {}", invalid.join(", ")).into()),
            hint: None,
        });
    }
    Ok(())
}
