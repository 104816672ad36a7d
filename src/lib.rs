//! rowgate: a PostgREST-compatible REST API for PostgreSQL.
//!
//! A request flows through one stage per module: `http` (server, routing, errors to HTTP) →
//! `rowgate_request` (parsing, a crate of its own) → `plan` (names resolved against the
//! `schema` cache) → `sql` (statements) → `db` (pool, settings, execution) → `response`.
//! See ARCHITECTURE.md for the invariants each stage keeps.

pub mod accounts;
pub mod apikey;
pub mod auth;
pub mod backend;
pub mod cache;
pub mod cluster;
pub mod config;
pub mod error;
pub mod http;
pub mod plan;
pub mod response;
pub mod schema;
pub mod server;

/// Lower-case hex digits of `bytes` (key and token hashes, random ids): one allocation, where
/// `format!("{b:02x}")` per byte made one per byte.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_lower_case_two_digits_a_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::hex(&[]), "");
    }
}
