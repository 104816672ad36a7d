//! Read-your-writes with read replicas, as the client sees it: after a write, the primary's
//! WAL position past it goes back in a cookie ([`COOKIE`]) and a header ([`HEADER`]); a request
//! that carries either is read only where that position has been replayed. The position is
//! the primary's, so it means the same to every instance.

use std::time::Duration;

use http::{HeaderValue, Response};

use crate::response::Body;

/// The cookie that carries a client's last write position.
pub const COOKIE: &str = "rowgate_lsn";

/// The header a client without cookies may send its last write position in (and a write's
/// answer carries it in).
pub const HEADER: &str = "x-rowgate-lsn";

/// The last write position a request carries: its [`HEADER`], else its [`COOKIE`]. One that does
/// not parse counts as [`crate::lsn::UNKNOWN`], which keeps the read on the primary.
pub fn since(headers: &[(&str, &str)]) -> Option<u64> {
    let header = headers.iter().find(|(name, _)| *name == HEADER).map(|(_, v)| *v);
    let cookie = || {
        headers.iter().filter(|(name, _)| *name == "cookie").find_map(|(_, v)| {
            v.split(';').find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        })
    };
    header.or_else(cookie).map(|v| crate::lsn::parse(v).unwrap_or(crate::lsn::UNKNOWN))
}

/// `response` telling the client where its write left the primary: a cookie for as long as a
/// replica may take to replay it and still be used (twice `db-replica-max-lag`, at least five
/// minutes), and the header.
pub fn tell(response: &mut Response<Body>, lsn: u64, max_lag: Duration) {
    let age = (2 * max_lag.as_secs()).max(300);
    let position = crate::lsn::format(lsn);
    let cookie = format!("{COOKIE}={position}; Path=/; Max-Age={age}; HttpOnly; SameSite=Lax");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(http::header::SET_COOKIE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&position) {
        response.headers_mut().insert(HEADER, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_its_last_write_in_a_header_or_a_cookie() {
        assert_eq!(since(&[("cookie", "a=b; rowgate_lsn=0/16B3748; c=d")]), Some(0x16B_3748));
        assert_eq!(since(&[("x-rowgate-lsn", "1/0"), ("cookie", "rowgate_lsn=0/1")]), Some(1 << 32));
        assert_eq!(since(&[("cookie", "rowgate_lsn=garbage")]), Some(crate::lsn::UNKNOWN));
        assert_eq!(since(&[("cookie", "rowgate_lsnx=0/1")]), None);
        assert_eq!(since(&[]), None);
    }
}
