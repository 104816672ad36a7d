//! `date` and `timestamp` (without time zone) rendered from their binary form exactly as
//! PostgreSQL's `to_json` prints them (`EncodeDateOnly` / `EncodeDateTime` in XSD style), so
//! PostgreSQL does not have to format them. `timestamptz` depends on the session time zone and
//! stays with PostgreSQL.

/// Julian day of 2000-01-01, PostgreSQL's epoch.
const POSTGRES_EPOCH_JDATE: i64 = 2_451_545;
const USECS_PER_DAY: i64 = 86_400_000_000;

/// Writes a binary `date` (days since 2000-01-01) as a JSON string.
pub fn write_date(out: &mut Vec<u8>, raw: &[u8]) {
    let days = raw.try_into().map(i32::from_be_bytes).unwrap_or_default();
    match days {
        i32::MAX => out.extend_from_slice(b"\"infinity\""),
        i32::MIN => out.extend_from_slice(b"\"-infinity\""),
        _ => {
            let (y, m, d) = j2date(i64::from(days) + POSTGRES_EPOCH_JDATE);
            out.push(b'"');
            push_date(out, y, m, d);
            if y <= 0 {
                out.extend_from_slice(b" BC");
            }
            out.push(b'"');
        }
    }
}

/// Writes a binary `timestamp` (microseconds since 2000-01-01 00:00) as a JSON string.
pub fn write_timestamp(out: &mut Vec<u8>, raw: &[u8]) {
    let micros = raw.try_into().map(i64::from_be_bytes).unwrap_or_default();
    match micros {
        i64::MAX => return out.extend_from_slice(b"\"infinity\""),
        i64::MIN => return out.extend_from_slice(b"\"-infinity\""),
        _ => {}
    }
    let mut date = micros / USECS_PER_DAY;
    let mut time = micros % USECS_PER_DAY;
    if time < 0 {
        time += USECS_PER_DAY;
        date -= 1;
    }
    let (y, m, d) = j2date(date + POSTGRES_EPOCH_JDATE);
    out.push(b'"');
    push_date(out, y, m, d);
    out.push(b'T');
    let (hour, rest) = (time / 3_600_000_000, time % 3_600_000_000);
    let (min, rest) = (rest / 60_000_000, rest % 60_000_000);
    let (sec, fsec) = (rest / 1_000_000, rest % 1_000_000);
    push_padded(out, hour, 2);
    out.push(b':');
    push_padded(out, min, 2);
    out.push(b':');
    push_padded(out, sec, 2);
    if fsec != 0 {
        // Six digits, trailing zeros dropped, as AppendSeconds prints them.
        let mut digits = [0u8; 6];
        let mut f = fsec;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (f % 10) as u8;
            f /= 10;
        }
        let len = digits.iter().rposition(|&c| c != b'0').map_or(0, |i| i + 1);
        out.push(b'.');
        out.extend_from_slice(&digits[..len]);
    }
    if y <= 0 {
        out.extend_from_slice(b" BC");
    }
    out.push(b'"');
}

/// `YYYY-MM-DD`, the year as PostgreSQL prints it: 1 BC is year 0 internally.
fn push_date(out: &mut Vec<u8>, y: i64, m: i64, d: i64) {
    push_padded(out, if y > 0 { y } else { 1 - y }, 4);
    out.push(b'-');
    push_padded(out, m, 2);
    out.push(b'-');
    push_padded(out, d, 2);
}

fn push_padded(out: &mut Vec<u8>, n: i64, width: usize) {
    let mut buf = itoa::Buffer::new();
    let s = buf.format(n);
    for _ in s.len()..width {
        out.push(b'0');
    }
    out.extend_from_slice(s.as_bytes());
}

/// PostgreSQL's `j2date`: a Julian day number to (year, month, day) in the proleptic
/// Gregorian calendar, year 0 being 1 BC.
fn j2date(jd: i64) -> (i64, i64, i64) {
    let mut julian = jd + 32044;
    let mut quad = julian / 146_097;
    let extra = (julian - quad * 146_097) * 4 + 3;
    julian += 60 + quad * 3 + extra / 146_097;
    quad = julian / 1461;
    julian -= quad * 1461;
    let mut y = julian * 4 / 1461;
    julian = if y != 0 { (julian + 305) % 365 } else { (julian + 306) % 366 } + 123;
    y += quad * 4;
    let year = y - 4800;
    quad = julian * 2141 / 65536;
    let day = julian - 7834 * quad / 256;
    let month = (quad + 10) % 12 + 1;
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(days: i32) -> String {
        let mut out = Vec::new();
        write_date(&mut out, &days.to_be_bytes());
        String::from_utf8(out).unwrap()
    }

    fn timestamp(micros: i64) -> String {
        let mut out = Vec::new();
        write_timestamp(&mut out, &micros.to_be_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn dates_print_like_postgresql() {
        assert_eq!(date(0), "\"2000-01-01\"");
        assert_eq!(date(59), "\"2000-02-29\"");
        assert_eq!(date(8780), "\"2024-01-15\"");
        assert_eq!(date(-1), "\"1999-12-31\"");
        // '0044-03-15 BC'::date - '2000-01-01'::date
        assert_eq!(date(-746_117), "\"0044-03-15 BC\"");
        assert_eq!(date(-2_451_507), "\"4713-01-01 BC\"");
        assert_eq!(date(i32::MAX), "\"infinity\"");
        assert_eq!(date(i32::MIN), "\"-infinity\"");
    }

    #[test]
    fn timestamps_print_like_to_json() {
        assert_eq!(timestamp(0), "\"2000-01-01T00:00:00\"");
        // '2024-01-15 13:45:30.123456'
        // Expected values from PostgreSQL: to_json('2024-01-15 13:45:30.123456'::timestamp) etc.
        assert_eq!(timestamp(758_641_530_123_456), "\"2024-01-15T13:45:30.123456\"");
        assert_eq!(timestamp(758_641_530_500_000), "\"2024-01-15T13:45:30.5\"");
        assert_eq!(timestamp(252_455_616_001_050_000), "\"10000-01-01T00:00:01.05\"");
        assert_eq!(timestamp(-63_082_285_200_000_000), "\"0001-12-31T23:00:00 BC\"");
        assert_eq!(timestamp(-1), "\"1999-12-31T23:59:59.999999\"");
        assert_eq!(timestamp(i64::MAX), "\"infinity\"");
    }
}
