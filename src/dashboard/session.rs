//! An administrator's session: a random token in an `HttpOnly`, `SameSite=Strict` cookie, kept
//! by its SHA-256, and a CSRF token derived from it that every request of the session carries
//! in a header (`X-Rowgate-Csrf`). The pair is the administrator's credential on every service
//! (`http::identify`): a cookie alone — what a browser attaches to another site's request —
//! identifies no one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{header, HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

/// The session cookie.
pub const COOKIE: &str = "rowgate_dashboard";
/// The header a session's requests carry its CSRF token in.
pub const CSRF_HEADER: &str = "x-rowgate-csrf";
/// How long a session lasts.
pub const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// A new random token (256 bits, URL-safe base64).
pub fn new_token() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(crate::random_bytes::<32>())
}

/// How a session's token is kept.
pub fn token_hash(token: &str) -> String {
    crate::hex(&Sha256::digest(token.as_bytes()))
}

/// The CSRF token of a session: only who can read the cookie's token (the page, told at sign-in)
/// can know it.
pub fn csrf_of(token: &str) -> String {
    crate::hex(&Sha256::digest(format!("rowgate-dashboard-csrf:{token}").as_bytes()))
}

/// The session token a request's cookies carry.
pub fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .filter(|t| !t.is_empty())
}

/// The session token of a request that carries both the cookie and the CSRF token that goes
/// with it; `Some(Err)` for a pair that does not match.
pub fn credential(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    let csrf = headers.get(CSRF_HEADER)?.to_str().ok()?;
    let token = cookie_token(headers)?;
    let expected = csrf_of(token);
    Some(match subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), csrf.as_bytes()).into() {
        true => Ok(token),
        false => Err(()),
    })
}

/// The `Set-Cookie` that starts a session (`Secure` when the request came over HTTPS).
pub fn set_cookie(token: &str, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let value = format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        LIFETIME.as_secs()
    );
    HeaderValue::from_str(&value).expect("a token is URL-safe base64")
}

/// The `Set-Cookie` that ends one.
pub fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("rowgate_dashboard=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// Failed sign-ins a client address may make in [`LOGIN_WINDOW`].
const LOGIN_FAILURES: u32 = 10;
const LOGIN_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at most: beyond it, those whose window has passed are forgotten.
const LOGIN_CLIENTS: usize = 10_000;

/// Failed sign-ins per client address: past [`LOGIN_FAILURES`] in a window, refused until it
/// ends (also a right password: guessing must not learn which one was).
#[derive(Default)]
pub struct LoginLimit {
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl LoginLimit {
    /// Whether `client` may try now; the seconds until it may, if not.
    pub fn check(&self, client: IpAddr) -> Result<(), u64> {
        let client = crate::client_key(client);
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        match failures.get(&client) {
            Some((n, since)) if *n >= LOGIN_FAILURES && since.elapsed() < LOGIN_WINDOW => {
                Err((LOGIN_WINDOW - since.elapsed()).as_secs() + 1)
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed attempt of `client`.
    pub fn failed(&self, client: IpAddr) {
        let client = crate::client_key(client);
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= LOGIN_CLIENTS {
            failures.retain(|_, (_, since)| since.elapsed() < LOGIN_WINDOW);
        }
        let entry = failures.entry(client).or_insert((0, Instant::now()));
        if entry.1.elapsed() >= LOGIN_WINDOW {
            *entry = (0, Instant::now());
        }
        entry.0 += 1;
    }

    /// Forgets `client`'s failures (it signed in).
    pub fn succeeded(&self, client: IpAddr) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(&crate::client_key(client));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_without_its_csrf_token_is_no_credential() {
        let token = new_token();
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, format!("theme=dark; {COOKIE}={token}").parse().unwrap());
        assert_eq!(credential(&headers), None);
        headers.insert(CSRF_HEADER, HeaderValue::from_static("guess"));
        assert_eq!(credential(&headers), Some(Err(())));
        headers.insert(CSRF_HEADER, csrf_of(&token).parse().unwrap());
        assert_eq!(credential(&headers), Some(Ok(token.as_str())));
    }

    #[test]
    fn ten_failures_close_the_door_for_the_window() {
        let limit = LoginLimit::default();
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..LOGIN_FAILURES {
            assert!(limit.check(client).is_ok());
            limit.failed(client);
        }
        assert!(limit.check(client).is_err());
        assert!(limit.check("192.0.2.2".parse().unwrap()).is_ok());
    }
}
