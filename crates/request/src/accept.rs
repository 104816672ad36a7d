//! The `Accept` header, as WAI's `parseHttpAccept` plus PostgREST's `decodeMediaType`.

use crate::MediaType;

/// Media types by preference: q descending, then more specific first (parameters minus
/// wildcards, as WAI counts them), then header order. Entries with `q=0` are dropped.
pub(crate) fn parse_accept(value: &str) -> Vec<MediaType> {
    let mut entries: Vec<(String, f64, i64)> = value
        .split(',')
        .filter_map(|entry| {
            // WAI removes every space before looking for the `;q=` parameter.
            let entry: String = entry.chars().filter(|&c| c != ' ').collect();
            let (mt, q) = match entry.split_once(";q=") {
                Some((mt, rest)) => (mt.to_string(), read_q(rest)),
                None => (entry, 1.0),
            };
            if mt.is_empty() || q <= 0.0 {
                return None;
            }
            let specificity = count(&mt, ';') - count(&mt, '*');
            Some((mt, q, specificity))
        })
        .collect();
    entries.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then(b.2.cmp(&a.2)));
    entries.into_iter().map(|(mt, _, _)| decode_media_type(&mt)).collect()
}

/// Occurrences of `c` in `s`, as a signed count for the specificity difference.
fn count(s: &str, c: char) -> i64 {
    i64::try_from(s.matches(c).count()).unwrap_or(i64::MAX)
}

/// The leading number of a q value up to the next `;`; unreadable means 1, as in WAI.
fn read_q(rest: &str) -> f64 {
    let q = rest.split(';').next().unwrap_or_default();
    let end = q.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(q.len());
    let num = q.get(..end).unwrap_or_default();
    if !num.starts_with(|c: char| c.is_ascii_digit()) {
        return 1.0;
    }
    // Haskell's `reads` stops at a second dot; so does taking the first two parts.
    let mut parts = num.splitn(3, '.');
    let int = parts.next().unwrap_or("0");
    let frac = parts.next().unwrap_or("");
    format!("{int}.{frac}0").parse().unwrap_or(1.0)
}

/// A media type split into type, subtype and (lower-cased name, value) parameters.
type Tokens<'a> = (&'a str, &'a str, Vec<(String, String)>);

/// `type/subtype` and `;key=value` parameters, or `None` when there is no `type/subtype`.
/// Parameters are read while they parse and the rest is ignored, as in PostgREST's current
/// tokenizer (12.x required the end of input, so `charset=utf-8` made `application/json` unknown).
fn tokenize(mt: &str) -> Option<Tokens<'_>> {
    let (main, rest) = mt.split_once('/')?;
    let sub_end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '-')))
        .unwrap_or(rest.len());
    let (sub, mut params_text) = rest.split_at(sub_end);
    let main_ok = main.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '*'));
    if main.is_empty() || sub.is_empty() || !main_ok {
        return None;
    }
    let mut params = Vec::new();
    while let Some((key, value, rest)) = key_val(params_text) {
        params.push((key.to_ascii_lowercase(), value.to_string()));
        params_text = rest;
    }
    Some((main, sub, params))
}

/// One `;key=value` (value plain or double-quoted) and the text after it.
fn key_val(text: &str) -> Option<(&str, &str, &str)> {
    let p = text.trim_start().strip_prefix(';')?.trim_start();
    let key_end = p.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(p.len());
    let (key, rest) = p.split_at(key_end);
    if key.is_empty() {
        return None;
    }
    let value = rest.trim_start().strip_prefix('=')?.trim_start();
    if let Some(quoted) = value.strip_prefix('"') {
        let (v, r) = quoted.split_once('"')?;
        return Some((key, v, r));
    }
    let end = value
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '|' | '-' | '.')))
        .unwrap_or(value.len());
    if end == 0 {
        return None;
    }
    let (v, r) = value.split_at(end);
    Some((key, v, r))
}

/// One media type, as PostgREST's `decodeMediaType` (type and subtype case-insensitive).
pub(crate) fn decode_media_type(mt: &str) -> MediaType {
    let Some((main, sub, params)) = tokenize(mt) else {
        return MediaType::Other(mt.to_string());
    };
    let strip_nulls = params.iter().any(|(k, v)| k == "nulls" && v == "stripped");
    let main_l = main.to_ascii_lowercase();
    let sub_l = sub.to_ascii_lowercase();
    match (main_l.as_str(), sub_l.as_str()) {
        ("application", "json") => MediaType::Json,
        ("application", "geo+json") => MediaType::GeoJson,
        ("text", "csv") => MediaType::Csv,
        ("application", "openapi+json") => MediaType::OpenApi,
        // OpenAPI 3's own media type; rowgate describes its API in 3.1 only.
        ("application", "vnd.oai.openapi+json") => match params.iter().find(|(k, _)| k == "version") {
            None => MediaType::OpenApi31,
            Some((_, v)) if v == "3.1" || v.starts_with("3.1.") => MediaType::OpenApi31,
            Some((_, v)) => MediaType::Other(format!("{main}/{sub};version={v}")),
        },
        ("application", "vnd.pgrst.plan" | "vnd.pgrst.plan+text" | "vnd.pgrst.plan+json") => {
            // Keep everything after `application/vnd.pgrst.plan`: suffix and parameters.
            let raw = mt.get("application/vnd.pgrst.plan".len()..).unwrap_or_default();
            MediaType::Plan { raw: raw.to_string() }
        }
        ("application", "vnd.pgrst.object+json" | "vnd.pgrst.object") => {
            MediaType::SingleObject { strip_nulls }
        }
        ("application", "vnd.pgrst.array+json" | "vnd.pgrst.array") => MediaType::ArrayJson { strip_nulls },
        ("*", "*") => MediaType::Any,
        _ => MediaType::Other(format!("{main}/{sub}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_types() {
        let other = |s: &str| MediaType::Other(s.into());
        let cases: Vec<(&str, MediaType)> = vec![
            ("application/json", MediaType::Json),
            ("Application/JSON", MediaType::Json),
            ("application/json;charset=utf-8", MediaType::Json),
            ("application/geo+json", MediaType::GeoJson),
            ("text/csv", MediaType::Csv),
            ("application/openapi+json", MediaType::OpenApi),
            ("application/vnd.oai.openapi+json;version=3.1", MediaType::OpenApi31),
            ("application/vnd.oai.openapi+json", MediaType::OpenApi31),
            (
                "application/vnd.oai.openapi+json;version=3.0",
                other("application/vnd.oai.openapi+json;version=3.0"),
            ),
            ("*/*", MediaType::Any),
            ("application/*", other("application/*")),
            ("text/plain", other("text/plain")),
            ("application/vnd.twkb", other("application/vnd.twkb")),
            ("garbage", other("garbage")),
            ("application/vnd.pgrst.object+json", MediaType::SingleObject { strip_nulls: false }),
            ("ApplicatIon/vnd.PgRsT.object+json", MediaType::SingleObject { strip_nulls: false }),
            ("application/vnd.pgrst.object;nulls=stripped", MediaType::SingleObject { strip_nulls: true }),
            ("application/vnd.pgrst.array+json;nulls=stripped", MediaType::ArrayJson { strip_nulls: true }),
            ("application/vnd.pgrst.array+json", MediaType::ArrayJson { strip_nulls: false }),
            (
                "application/vnd.pgrst.plan+json;for=\"text/csv\";options=analyze|verbose",
                MediaType::Plan { raw: "+json;for=\"text/csv\";options=analyze|verbose".into() },
            ),
            ("application/vnd.pgrst.plan", MediaType::Plan { raw: String::new() }),
        ];
        for (input, want) in cases {
            assert_eq!(decode_media_type(input), want, "input {input:?}");
        }
    }

    #[test]
    fn ordering() {
        let cases: Vec<(&str, Vec<MediaType>)> = vec![
            ("", vec![]),
            ("text/csv, application/json", vec![MediaType::Csv, MediaType::Json]),
            ("text/csv;q=0.5, application/json", vec![MediaType::Json, MediaType::Csv]),
            ("*/*;q=0.8, text/csv;q=0.8", vec![MediaType::Csv, MediaType::Any]),
            ("text/csv;q=0, application/json;q=0.1", vec![MediaType::Json]),
            (
                "application/vnd.pgrst.object+json;nulls=stripped, application/json",
                vec![MediaType::SingleObject { strip_nulls: true }, MediaType::Json],
            ),
            ("text/csv;q=abc, application/json;q=0.9", vec![MediaType::Csv, MediaType::Json]),
            ("text/csv ; q=0.2 , application/geo+json", vec![MediaType::GeoJson, MediaType::Csv]),
        ];
        for (input, want) in cases {
            assert_eq!(parse_accept(input), want, "input {input:?}");
        }
    }
}
