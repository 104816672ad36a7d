//! rowgate: a PostgREST-compatible REST API for PostgreSQL and SQLite, with Supabase's auth
//! and storage endpoints beside it.
//!
//! A request flows through one stage per module: `http` (server, routing) → `rowgate_request`
//! (parsing, a crate of its own) → `plan` (names resolved against the `schema` cache) →
//! `backend` (statements in the database's dialect, run) → `response`. See ARCHITECTURE.md for
//! the invariants each stage keeps.

pub mod accounts;
pub mod apikey;
pub mod auth;
pub mod backend;
pub mod backup;
mod banner;
pub mod cache;
pub mod cluster;
pub mod config;
pub mod cron;
pub mod dashboard;
pub mod error;
pub mod format;
pub mod functions;
pub mod http;
pub mod lsn;
pub mod openapi;
pub mod outcome;
pub mod plan;
pub mod pocketbase;
pub mod realtime;
pub mod response;
pub mod schema;
pub mod server;
pub mod storage;
pub mod webhooks;

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

/// The key of a client address (rate limits, login limits): an IPv6 client's /64, which one
/// host can use whole; an IPv4-mapped address as the IPv4 one.
pub fn client_key(client: std::net::IpAddr) -> std::net::IpAddr {
    match client {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => std::net::IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
        v4 => v4,
    }
}

/// `N` bytes from the system's random source.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the system's random source");
    b
}

/// A random (version 4) UUID.
pub fn uuid_v4() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_lower_case_two_digits_a_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::hex(&[]), "");
    }
}
