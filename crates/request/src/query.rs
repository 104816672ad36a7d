//! Query-string splitting and decoding, as http-types' `parseQueryReplacePlus True`
//! (which PostgREST uses): pairs split on `&` and `;`, `+` means space, `%XX` is decoded.

/// One `key[=value]` pair; `value` is `None` when there was no `=`.
pub(crate) type RawParam = (String, Option<String>);

/// Splits and decodes a raw query string (a leading `?` is ignored).
pub(crate) fn split_query(query: &str) -> Vec<RawParam> {
    let query = query.strip_prefix('?').unwrap_or(query);
    query
        .split(['&', ';'])
        .filter(|seg| !seg.is_empty())
        .map(|seg| match seg.split_once('=') {
            Some((k, v)) => (decode(k), Some(decode(v))),
            None => (decode(seg), None),
        })
        .collect()
}

/// `+` to space, then percent-decoding; invalid escapes stay as they are, invalid UTF-8
/// becomes U+FFFD (PostgREST would fail with a 500 instead).
pub(crate) fn decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(k: &str, v: Option<&str>) -> RawParam {
        (k.to_string(), v.map(String::from))
    }

    #[test]
    fn splitting() {
        let cases: Vec<(&str, Vec<RawParam>)> = vec![
            ("", vec![]),
            ("?a=1", vec![p("a", Some("1"))]),
            ("a=1&b", vec![p("a", Some("1")), p("b", None)]),
            ("a=1;b=2", vec![p("a", Some("1")), p("b", Some("2"))]),
            ("a=&&b=x=y", vec![p("a", Some("")), p("b", Some("x=y"))]),
            ("a=b+c%2Bd", vec![p("a", Some("b c+d"))]),
            ("na%6De=%E5%90%8D", vec![p("name", Some("名"))]),
            ("a=%zz%", vec![p("a", Some("%zz%"))]),
            ("a=%FF", vec![p("a", Some("\u{FFFD}"))]),
        ];
        for (input, want) in cases {
            assert_eq!(split_query(input), want, "input {input:?}");
        }
    }
}
