//! JSON rendering of binary result values, matching PostgreSQL's `to_json` output.

use crate::backend::postgres::sql::Render;
use crate::backend::postgres::RawValue;

/// The escaped `"key":` prefixes of a row's columns, computed once per response.
pub struct Keys {
    prefixes: Vec<(Vec<u8>, Render)>,
}

impl Keys {
    /// Escapes every key once.
    pub fn new(columns: &[(String, Render)]) -> Keys {
        let prefixes = columns
            .iter()
            .map(|(key, render)| {
                let mut p = Vec::with_capacity(key.len() + 3);
                write_string(&mut p, key.as_bytes());
                p.push(b':');
                (p, *render)
            })
            .collect();
        Keys { prefixes }
    }
}

/// Writes one row as a JSON object; `skip` leading columns are not part of the object. With
/// `strip_nulls`, null members are left out (nested ones were stripped by PostgreSQL).
pub fn write_row(out: &mut Vec<u8>, keys: &Keys, row: &tokio_postgres::Row, skip: usize, strip_nulls: bool) {
    out.push(b'{');
    let mut first = true;
    for (i, (prefix, render)) in keys.prefixes.iter().enumerate() {
        let value = row.get::<_, Option<RawValue>>(skip + i);
        // A JSON `null` (a json column holding null) is stripped too, as json_strip_nulls does.
        if strip_nulls && value.is_none_or(|RawValue(raw)| *render == Render::Json && raw == b"null") {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(prefix);
        match value {
            None => out.extend_from_slice(b"null"),
            Some(RawValue(raw)) => write_value(out, *render, raw),
        }
    }
    out.push(b'}');
}

/// Writes one non-null value.
pub fn write_value(out: &mut Vec<u8>, render: Render, raw: &[u8]) {
    let mut buf = itoa::Buffer::new();
    match render {
        Render::Int2 => {
            let v = raw.try_into().map(i16::from_be_bytes).unwrap_or_default();
            out.extend_from_slice(buf.format(v).as_bytes());
        }
        Render::Int4 => {
            let v = raw.try_into().map(i32::from_be_bytes).unwrap_or_default();
            out.extend_from_slice(buf.format(v).as_bytes());
        }
        Render::Int8 => {
            let v = raw.try_into().map(i64::from_be_bytes).unwrap_or_default();
            out.extend_from_slice(buf.format(v).as_bytes());
        }
        Render::Numeric => write_numeric(out, raw),
        Render::Bool => out.extend_from_slice(if raw.first() == Some(&1) { b"true" } else { b"false" }),
        Render::Text => write_string(out, raw),
        Render::Uuid => write_uuid(out, raw),
        Render::Date => crate::format::datetime::write_date(out, raw),
        Render::Timestamp => crate::format::datetime::write_timestamp(out, raw),
        Render::Json => out.extend_from_slice(raw),
        Render::Jsonb => out.extend_from_slice(raw.get(1..).unwrap_or_default()),
    }
}

/// Writes a JSON string the way PostgreSQL's `escape_json` does: `"` and `\` escaped, the
/// control characters with short forms as `\b \f \n \r \t`, other controls as `\u00XX`,
/// everything else (all non-ASCII included) as it is.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

fn write_uuid(out: &mut Vec<u8>, raw: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for (i, b) in raw.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
    out.push(b'"');
}

/// Writes a binary numeric as `numeric_out` prints it: all `dscale` fraction digits, no
/// exponent; NaN and infinities as strings, as `to_json` writes them.
fn write_numeric(out: &mut Vec<u8>, raw: &[u8]) {
    let word =
        |i: usize| -> i32 { raw.get(i..i + 2).map_or(0, |b| i32::from(i16::from_be_bytes([b[0], b[1]]))) };
    let ndigits = word(0).max(0) as usize;
    let weight = word(2);
    let sign = word(4) as u16;
    let dscale = word(6).max(0) as usize;
    match sign {
        0xC000 => return out.extend_from_slice(b"\"NaN\""),
        0xD000 => return out.extend_from_slice(b"\"Infinity\""),
        0xF000 => return out.extend_from_slice(b"\"-Infinity\""),
        _ => {}
    }
    let digit = |i: i32| -> i32 {
        if i < 0 || i as usize >= ndigits {
            0
        } else {
            word(8 + 2 * i as usize)
        }
    };
    if sign == 0x4000 {
        out.push(b'-');
    }
    if weight < 0 {
        out.push(b'0');
    } else {
        for i in 0..=weight {
            let d = digit(i);
            if i == 0 {
                out.extend_from_slice(itoa::Buffer::new().format(d).as_bytes());
            } else {
                push4(out, d);
            }
        }
    }
    if dscale > 0 {
        out.push(b'.');
        let mut written = 0;
        let mut i = weight + 1;
        while written < dscale {
            let d = digit(i);
            let digits = [(d / 1000) % 10, (d / 100) % 10, (d / 10) % 10, d % 10];
            for x in digits.iter().take(dscale - written) {
                out.push(b'0' + *x as u8);
            }
            written += 4.min(dscale - written);
            i += 1;
        }
    }
}

fn push4(out: &mut Vec<u8>, d: i32) {
    for x in [(d / 1000) % 10, (d / 100) % 10, (d / 10) % 10, d % 10] {
        out.push(b'0' + x as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: i16, weight: i16, sign: u16, dscale: u16, digits: &[i16]) -> String {
        let mut raw = Vec::new();
        for w in [ndigits as u16, weight as u16, sign, dscale] {
            raw.extend_from_slice(&w.to_be_bytes());
        }
        for d in digits {
            raw.extend_from_slice(&d.to_be_bytes());
        }
        let mut out = Vec::new();
        write_numeric(&mut out, &raw);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn numerics_print_like_numeric_out() {
        assert_eq!(numeric(2, 0, 0, 2, &[12, 5000]), "12.50");
        assert_eq!(numeric(0, 0, 0, 4, &[]), "0.0000");
        assert_eq!(numeric(2, 1, 0x4000, 0, &[1, 2345]), "-12345");
        assert_eq!(numeric(1, -1, 0, 5, &[1200]), "0.12000");
        assert_eq!(numeric(1, -2, 0, 6, &[500]), "0.000005");
        assert_eq!(numeric(1, 2, 0, 0, &[7]), "700000000");
        assert_eq!(numeric(0, 0, 0xC000, 0, &[]), "\"NaN\"");
    }

    #[test]
    fn strings_escape_like_escape_json() {
        let mut out = Vec::new();
        write_string(&mut out, "a\"b\\c\nd\u{1}é/".as_bytes());
        assert_eq!(String::from_utf8(out).unwrap(), r#""a\"b\\c\nd\u0001é/""#);
    }

    #[test]
    fn uuids_are_hyphenated() {
        let mut out = Vec::new();
        write_uuid(&mut out, &[0x12; 16]);
        assert_eq!(String::from_utf8(out).unwrap(), "\"12121212-1212-1212-1212-121212121212\"");
    }
}
