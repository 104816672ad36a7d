//! The request path: `/`, `/{relation}` or `/rpc/{function}`; anything else is a 404,
//! as in PostgREST's `getResource`.

use crate::{RequestError, Target};

/// Splits the raw path on `/` before percent-decoding each segment (so `%2F` stays inside
/// a name), like WAI's `pathInfo`. A trailing slash is an empty segment, hence a 404.
pub(crate) fn parse_path(path: &str) -> Result<Target, RequestError> {
    let path = path.strip_prefix('/').unwrap_or(path);
    if path.is_empty() {
        return Ok(Target::Root);
    }
    let segments: Vec<String> = path.split('/').map(decode_segment).collect();
    match segments.as_slice() {
        [name] => Ok(Target::Relation(name.clone())),
        [rpc, name] if rpc == "rpc" => Ok(Target::Rpc(name.clone())),
        _ => Err(RequestError::NotFound),
    }
}

/// Percent-decoding without the `+`-as-space rule, which only applies to query strings.
fn decode_segment(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let rel = |s: &str| Ok(Target::Relation(s.into()));
        let cases: Vec<(&str, Result<Target, RequestError>)> = vec![
            ("/", Ok(Target::Root)),
            ("", Ok(Target::Root)),
            ("/items", rel("items")),
            ("/caf%C3%A9", rel("café")),
            ("/a+b", rel("a+b")),
            ("/a%2Fb", rel("a/b")),
            ("/rpc", rel("rpc")),
            ("/rpc/fn", Ok(Target::Rpc("fn".into()))),
            ("/rpc/f%20n", Ok(Target::Rpc("f n".into()))),
            ("/a/b", Err(RequestError::NotFound)),
            ("/items/", Err(RequestError::NotFound)),
            ("/rpc/fn/x", Err(RequestError::NotFound)),
            ("//", Err(RequestError::NotFound)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_path(input), want, "input {input:?}");
        }
    }
}
