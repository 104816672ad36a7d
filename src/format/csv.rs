//! PostgREST's CSV: the keys as a header line (when there are rows), then one line per row,
//! each value as PostgreSQL writes a record's field. PostgreSQL's rows come as record text;
//! SQLite's fields are written here ([`push_field`]).

/// A CSV document of `rows` lines under `header`; `row(i, out)` writes line `i`.
pub fn document(header: &[String], rows: usize, mut row: impl FnMut(usize, &mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + rows * 128);
    if rows > 0 {
        out.extend_from_slice(header.join(",").as_bytes());
    }
    out.push(b'\n');
    for i in 0..rows {
        if i > 0 {
            out.push(b'\n');
        }
        row(i, &mut out);
    }
    out
}

/// `text` as PostgreSQL writes a record's field: unquoted unless it is empty or holds a comma,
/// quote, parenthesis, backslash or white space; quotes and backslashes doubled inside.
pub fn push_field(out: &mut Vec<u8>, text: &str) {
    let quote = text.is_empty()
        || text.chars().any(|c| matches!(c, '"' | '\\' | '(' | ')' | ',') || c.is_ascii_whitespace());
    if !quote {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    out.push(b'"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push(c as u8);
        }
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_as_postgresql_writes_record_fields() {
        let mut out = Vec::new();
        for (i, text) in ["1", "a b", "", "say \"hi\"", "a,b", "back\\slash"].iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_field(&mut out, text);
        }
        assert_eq!(String::from_utf8(out).unwrap(), r#"1,"a b","","say ""hi""","a,b","back\\slash""#);
    }

    #[test]
    fn no_rows_is_an_empty_header() {
        assert_eq!(document(&["a".into()], 0, |_, _| {}), b"\n");
        assert_eq!(document(&["a".into(), "b".into()], 2, |i, out| out.push(b'0' + i as u8)), b"a,b\n0\n1");
    }
}
