//! WAL positions (PostgreSQL's `pg_lsn`) as one number, and in PostgreSQL's text form
//! (`16/B374D848`): the change feed, the read replicas and read-your-writes compare them.

/// A position no replica reaches: what a write reports when the primary's position could not
/// be read, so that the client's reads stay on the primary while its cookie lasts.
pub const UNKNOWN: u64 = u64::MAX;

/// A WAL position in PostgreSQL's text form as one number.
pub fn parse(text: &str) -> Option<u64> {
    let (hi, lo) = text.trim().split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// A WAL position in PostgreSQL's text form.
pub fn format(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

#[cfg(test)]
mod tests {
    #[test]
    fn positions_read_and_write_as_postgresql_writes_them() {
        assert_eq!(super::parse("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(super::format(0x16_B374_D848), "16/B374D848");
        assert_eq!(super::parse("0/0"), Some(0));
        assert_eq!(super::parse("nonsense"), None);
        assert_eq!(super::parse("1/xyz"), None);
    }
}
